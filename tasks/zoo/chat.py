"""ChatML templates and the wrapping of a raw `tokenizers.Tokenizer` for transformers.

Both offline models speak ChatML (`<|im_start|>role\\n...<|im_end|>\\n`), end a turn with
`<|im_end|>` (= eos) and add no bos. The SmolLM2 template is the one shipped in its GGUF:
it inserts SmolLM's default system prompt when the conversation has none.
"""

from __future__ import annotations

from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

SMOLLM2_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

SMOLLM2_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n" + SMOLLM2_SYSTEM_PROMPT + "<|im_end|>\\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def wrap_tokenizer(
    tokenizer: Tokenizer, *, pad_token: str, chat_template: str, model_max_length: int
) -> PreTrainedTokenizerFast:
    """A transformers tokenizer with eos `<|im_end|>`, no bos, the given pad and template."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token=IM_END,
        unk_token=None,
        pad_token=pad_token,
        additional_special_tokens=[t for t in (ENDOFTEXT, IM_START) if t != pad_token],
        chat_template=chat_template,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
