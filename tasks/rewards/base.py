"""What every reward source returns, and the one method it has.

OpenRLHF's convention: `queries` are prompt + response texts (what a reward model reads),
`prompts` the prompt texts alone (so a rule can cut the response out), `labels` the
reference answers or None. Sources return per-sample float32 rewards plus named components
(`scores`) and diagnostics (`extra_logs`), all the same length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from alignflow.errors import ConfigError


@dataclass(frozen=True)
class RewardOutput:
    """rewards: float32 (N,); scores: per-source components (N,); extra_logs: metrics (N,);
    batch_logs: metrics of the whole batch (an `extra_logs` value that was one number, as
    OpenRLHF's example reward functions return a batch accuracy); filter_scores: what
    dynamic filtering reads (OpenRLHF's `scores`: a source's `scores["score"]`, else its
    reward), set by `CombinedReward`."""

    rewards: Tensor
    scores: dict[str, Tensor] = field(default_factory=dict)
    extra_logs: dict[str, Tensor] = field(default_factory=dict)
    batch_logs: dict[str, float] = field(default_factory=dict)
    filter_scores: Tensor | None = None


@runtime_checkable
class RewardSource(Protocol):
    """Anything that scores a batch of samples."""

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput: ...


def responses_of(queries: Sequence[str], prompts: Sequence[str]) -> list[str]:
    """The response part of each query (query = prompt + response); the whole query if the
    prompt is not its prefix (e.g. a chat template was applied to one but not the other)."""
    return [q[len(p):] if q.startswith(p) else q for q, p in zip(queries, prompts, strict=True)]


def check_batch(queries: Sequence[str], prompts: Sequence[str],
                labels: Sequence[str | None]) -> None:
    """Refuse mismatched inputs early, naming the lengths."""
    if not len(queries) == len(prompts) == len(labels):
        raise ConfigError(f"reward inputs differ in length: {len(queries)} queries, "
                          f"{len(prompts)} prompts, {len(labels)} labels; expected equal")


def to_vector(values: object, n: int, *, what: str, where: str) -> Tensor:
    """Turn a list/tensor of numbers into a finite float32 (n,) tensor, or raise one line.

    `what` names the value (e.g. "rewards"), `where` the source (file, URL) for the message.
    """
    try:
        if isinstance(values, Tensor):
            vec = values.detach().to("cpu", torch.float32)
        else:
            if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
                raise TypeError(type(values).__name__)
            if any(isinstance(v, (bool, str, bytes)) or v is None for v in values):
                raise TypeError("non-numeric item")
            vec = torch.tensor([float(v) for v in values], dtype=torch.float32)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"{where} returned non-numeric {what} ({exc}); expected a list or "
                          f"tensor of {n} floats") from None
    vec = vec.reshape(-1) if vec.dim() == 2 and vec.shape[-1] == 1 else vec
    if vec.dim() != 1 or vec.shape[0] != n:
        got = vec.shape[0] if vec.dim() == 1 else tuple(vec.shape)
        raise ConfigError(f"{where} returned {got} {what} for {n} queries; expected {n}")
    if not torch.isfinite(vec).all():
        bad = int((~torch.isfinite(vec)).nonzero()[0])
        raise ConfigError(f"{where} returned a non-finite {what} value "
                          f"({vec[bad].item()} at index {bad}); expected finite floats")
    return vec


def _batch_number(value: object, n: int) -> float | None:
    """The number in a 0-dim tensor, a plain number, or a one-item list (when n != 1)."""
    if isinstance(value, Tensor) and (value.dim() == 0 or (value.numel() == 1 and n != 1)):
        return float(value.detach().reshape(-1)[0])
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes) and len(value) == 1 \
            and n != 1 and isinstance(value[0], int | float) and not isinstance(value[0], bool):
        return float(value[0])
    return None


def split_logs(values: object, n: int, *, where: str) -> tuple[dict[str, Tensor], dict[str, float]]:
    """`extra_logs` → (per-sample vectors, batch numbers): a value of n numbers is per
    sample; one number (0-dim tensor, float, one-item list) is a metric of the batch."""
    if values is None:
        return {}, {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where} returned extra_logs of type {type(values).__name__}; "
                          f"expected a dict of name -> {n} floats (or one float)")
    per, batch = {}, {}
    for key, value in values.items():
        number = _batch_number(value, n)
        if number is not None:
            batch[str(key)] = number
        else:
            per[str(key)] = to_vector(value, n, what=f"extra_logs[{key!r}]", where=where)
    return per, batch


def merge_outputs(parts: Sequence[RewardOutput], sizes: Sequence[int]) -> RewardOutput:
    """The output of a batch scored in consecutive parts of `sizes` samples: vectors
    concatenated, batch numbers averaged by part size."""
    total = max(sum(sizes), 1)
    batch_keys = {k for p in parts for k in p.batch_logs}
    return RewardOutput(
        torch.cat([p.rewards for p in parts]),
        {k: torch.cat([p.scores[k] for p in parts]) for k in parts[0].scores},
        {k: torch.cat([p.extra_logs[k] for p in parts]) for k in parts[0].extra_logs},
        {k: sum(p.batch_logs.get(k, 0.0) * s for p, s in zip(parts, sizes, strict=True)) / total
         for k in batch_keys})


def to_vectors(values: object, n: int, *, what: str, where: str) -> dict[str, Tensor]:
    """A {name: numbers} mapping (or None) → {name: float32 (n,)}; see `to_vector`."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where} returned {what} of type {type(values).__name__}; "
                          f"expected a dict of name -> {n} floats")
    return {str(k): to_vector(v, n, what=f"{what}[{k!r}]", where=where)
            for k, v in values.items()}

