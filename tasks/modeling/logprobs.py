"""Log-probabilities of given response tokens under a causal LM, padded or packed.

Both variants return float32 `log softmax(logits / temperature)[token]`, the definition the
engines use for behaviour logprobs (`engines.base`), so PPO ratios compare like with like.
"""

from __future__ import annotations

import torch

from alignflow.artifacts.tensors import pack


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0):
    """log softmax(logits / T) at `labels`, as logit − logsumexp (no (…, V) log-softmax copy)."""
    scaled = logits.float() / temperature
    picked = scaled.gather(-1, labels[..., None]).squeeze(-1)
    return picked - torch.logsumexp(scaled, dim=-1)


def sequence_logprobs(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, num_actions: int, *,
    temperature: float = 1.0,
) -> torch.Tensor:
    """(B, num_actions) logprobs of the last `num_actions` tokens of each row.

    Rows are `[left-padded prompt | response, right-padded]`; the caller masks the response
    padding with its action mask. Positions follow the attention mask, as in generation.
    """
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                   use_cache=False, logits_to_keep=num_actions + 1).logits
    return token_logprobs(logits[:, :-1], input_ids[:, -num_actions:], temperature)


def packed_sequence_logprobs(
    model, sequences: list[list[int]], num_actions: list[int], *, temperature: float = 1.0,
) -> list[torch.Tensor]:
    """Per sequence, the logprobs of its last `num_actions[i]` tokens, from one packed row.

    No padding: sequences are concatenated and `position_ids` restart at 0 for each. With
    `attention_mask=None` and no cache, transformers (>= 4.54) turns those restarts into a
    block-diagonal causal mask for sdpa/eager (`masking_utils.find_packed_sequence_indices`),
    so sequences never attend to each other; the tests check packed == padded.
    """
    assert len(sequences) == len(num_actions), "one num_actions per sequence"
    ids, positions, cu = pack(sequences)
    logits = model(input_ids=ids, position_ids=positions, attention_mask=None,
                   use_cache=False).logits
    all_lp = token_logprobs(logits[0, :-1], ids[0, 1:], temperature)  # lp of token t+1
    out = []
    for end, n in zip(cu[1:].tolist(), num_actions, strict=True):
        out.append(all_lp[end - n - 1 : end - 1])
    return out
