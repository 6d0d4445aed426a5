"""Forward passes of the learn step: response logprobs (and entropy) under the policy.

Packed by default: the micro-batch's sequences are concatenated into one row with restarting
position ids (a block-diagonal causal mask), so no compute goes to padding tokens. The
padded path keeps only the response logits (`logits_to_keep`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from alignflow.artifacts.tensors import pack
from alignflow.tasks.losses.tokens import entropy_from_logits
from alignflow.tasks.modeling.batching import padded_pairs
from alignflow.tasks.modeling.device import to_model
from alignflow.tasks.modeling.logprobs import token_logprobs


def response_logprobs(model, prompts: Sequence[list[int]], responses: Sequence[list[int]], *,
                      packed: bool, pad_id: int, temperature: float = 1.0,
                      with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, R) logprobs of each response token, right-padded with 0, and (B, R) entropy, on
    the model's device."""
    if packed:
        return _packed(model, prompts, responses, temperature, with_entropy)
    ids, mask, action = to_model(model, *padded_pairs(prompts, responses, pad_id))
    width = action.shape[1]
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False,
                   logits_to_keep=width + 1).logits[:, :-1].float() / temperature
    logp = token_logprobs(logits, ids[:, -width:]) * action
    entropy = _entropy(logits) * action if with_entropy else None
    return logp, entropy


def _entropy(logits: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return entropy_from_logits(logits)


def _packed(model, prompts, responses, temperature: float, with_entropy: bool):
    seqs = [list(p) + list(r) for p, r in zip(prompts, responses, strict=True)]
    ids, positions, cu = pack(seqs)
    ids, positions = to_model(model, ids, positions)
    logits = model(input_ids=ids, position_ids=positions, attention_mask=None,
                   use_cache=False).logits[0].float() / temperature
    width = max(len(r) for r in responses)
    logp = logits.new_zeros(len(seqs), width)
    entropy = logits.new_zeros(len(seqs), width) if with_entropy else None
    for i, (end, resp) in enumerate(zip(cu[1:].tolist(), responses, strict=True)):
        n = len(resp)
        rows = logits[end - n - 1 : end - 1]
        logp[i, :n] = token_logprobs(rows, ids[0, end - n : end])
        if entropy is not None:
            entropy[i, :n] = _entropy(rows)
    return logp, entropy
