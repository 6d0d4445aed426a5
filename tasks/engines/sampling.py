"""Per-row seeded sampling, logit filters and stop-string checks for hand-rolled decode loops.

Each (prompt, sample) row owns a `torch.Generator` seeded from (seed, prompt_index,
sample_index), so a row's draws do not depend on which other rows share its micro-batch.
"""

from __future__ import annotations

import hashlib

import torch
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from alignflow.tasks.engines.base import SamplingParams


def row_seed(seed: int, prompt_index: int, sample_index: int) -> int:
    """A 63-bit seed for one (prompt, sample) row, stable across batchings and processes."""
    digest = hashlib.sha256(f"{seed}:{prompt_index}:{sample_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def row_generators(seed: int, rows: list[tuple[int, int]],
                   device: torch.device | str = "cpu") -> list[torch.Generator]:
    """One generator per row, on the device the logits live on (multinomial needs that)."""
    gens = []
    for prompt_index, sample_index in rows:
        g = torch.Generator(device=device)
        g.manual_seed(row_seed(seed, prompt_index, sample_index))
        gens.append(g)
    return gens


def behaviour_logprobs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """(B, V) float32 log softmax(logits / T); greedy decoding reports T = 1."""
    temperature = params.temperature if params.temperature > 0 else 1.0
    return torch.log_softmax(logits.float() / temperature, dim=-1)


def filter_logprobs(logprobs: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Applies top-k then top-p (transformers' warpers) to temperature-scaled log-probs."""
    if params.top_k > 0:
        logprobs = TopKLogitsWarper(top_k=params.top_k)(None, logprobs)
    if params.top_p < 1.0:
        logprobs = TopPLogitsWarper(top_p=params.top_p)(None, logprobs)
    return logprobs


def sample_tokens(
    logits: torch.Tensor, params: SamplingParams, gens: list[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draws one token per row; returns (tokens (B,), behaviour logprobs of them (B,))."""
    logprobs = behaviour_logprobs(logits, params)
    if params.greedy:
        tokens = logprobs.argmax(dim=-1)
    else:
        probs = torch.softmax(filter_logprobs(logprobs.clone(), params), dim=-1)
        tokens = torch.cat(
            [torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(gens)]
        )
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


class StopChecker:
    """Finds the first response token whose text completes a stop string."""

    def __init__(self, tokenizer, stop: tuple[str, ...]) -> None:
        self.tokenizer = tokenizer
        self.stop = stop
        # every token decodes to >= 1 byte, a char is <= 4 bytes: this window always suffices
        self.window = 4 * max((len(s) for s in stop), default=0) + 1

    def hit(self, response_ids: list[int]) -> bool:
        if not self.stop:
            return False
        text = self.tokenizer.decode(response_ids[-self.window :], skip_special_tokens=False)
        return any(s in text for s in self.stop)
