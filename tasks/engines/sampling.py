"""Per-row seeded sampling, logit filters and stop-string checks for hand-rolled decode loops.

Each (prompt, sample) row owns a stream of uniform numbers seeded from (seed, prompt_index,
sample_index), so a row's draws do not depend on which other rows share its micro-batch.
A step draws one uniform per row and picks every row's token in one vectorised
inverse-CDF lookup (no per-row `multinomial` call in a Python loop).
"""

from __future__ import annotations

import hashlib
import random

import torch
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from alignflow.tasks.engines.base import SamplingParams


def row_seed(seed: int, prompt_index: int, sample_index: int) -> int:
    """A 63-bit seed for one (prompt, sample) row, stable across batchings and processes."""
    digest = hashlib.sha256(f"{seed}:{prompt_index}:{sample_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


class RowStreams:
    """One uniform stream per row (Mersenne Twister seeded by `row_seed`): the same numbers
    in every process and on every device, whatever the batch."""

    def __init__(self, seed: int, rows: list[tuple[int, int]]) -> None:
        self.streams = [random.Random(row_seed(seed, p, s)) for p, s in rows]

    def uniforms(self) -> torch.Tensor:
        """(B,) float64 in [0, 1): the next draw of every row."""
        return torch.tensor([g.random() for g in self.streams], dtype=torch.float64)


def draw(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling, one token per row: the first index whose cumulative
    probability exceeds u · total (tokens of probability 0 are never picked)."""
    cdf = probs.to(torch.float64).cumsum(dim=-1)
    total = cdf[:, -1:]
    target = (uniforms.to(cdf.device)[:, None] * total).minimum(total.nextafter(total.new_zeros(())))
    return torch.searchsorted(cdf, target, right=True).squeeze(-1).clamp_(max=probs.shape[-1] - 1)


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
    logits: torch.Tensor, params: SamplingParams, streams: RowStreams
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draws one token per row; returns (tokens (B,), behaviour logprobs of them (B,))."""
    logprobs = behaviour_logprobs(logits, params)
    if params.greedy:
        tokens = logprobs.argmax(dim=-1)
    else:
        filtered = filter_logprobs(logprobs.clone(), params) if params.top_k > 0 or \
            params.top_p < 1.0 else logprobs
        tokens = draw(filtered.exp(), streams.uniforms())  # draw needs no normalised probs
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
