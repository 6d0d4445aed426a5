"""Normalisation: masked global whitening of advantages, running reward moments."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


def whiten(x: Tensor, mask: Tensor, *, use_std: bool = True, eps: float = 1e-8) -> Tensor:
    """(x − μ)/√max(σ², ε) over valid tokens of the whole batch; σ² is the biased variance.

    Masked positions come back as 0. use_std=False only centres (OpenRLHF
    `--no_advantage_std_norm`).
    """
    m = mask.bool()
    n = m.sum().clamp(min=1)
    mean = torch.where(m, x, 0.0).sum() / n
    centred = x - mean
    if use_std:
        var = torch.where(m, centred.pow(2), 0.0).sum() / n
        centred = centred * var.clamp(min=eps).rsqrt()
    return torch.where(m, centred, 0.0)


@dataclass
class RunningMoments:
    """Running mean / variance of rewards over all batches seen (Chan et al. parallel update).

    `state()` / `from_state()` round-trip through JSON for checkpoints.
    """

    mean: float = 0.0
    var: float = 1.0
    count: float = 0.0

    def update(self, x: Tensor) -> tuple[float, float]:
        """Fold in a batch; returns the batch's (mean, std) (population)."""
        x = x.detach().double().flatten()
        n = float(x.numel())
        if n == 0:
            return 0.0, 0.0
        b_mean, b_var = x.mean().item(), x.var(unbiased=False).item()
        total = self.count + n
        delta = b_mean - self.mean
        m2 = self.var * self.count + b_var * n + delta * delta * self.count * n / total
        self.mean += delta * n / total
        self.var = m2 / total
        self.count = total
        return b_mean, math.sqrt(b_var)

    @property
    def std(self) -> float:
        """Population standard deviation of everything seen so far."""
        return math.sqrt(self.var)

    def normalize(self, x: Tensor, *, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
        """(x − μ)/σ with the running moments (μ not subtracted when shift_mean=False)."""
        centred = x - self.mean if shift_mean else x
        return centred / (self.std + eps)

    def state(self) -> dict[str, float]:
        """JSON-ready state."""
        return {"mean": self.mean, "var": self.var, "count": self.count}

    @classmethod
    def from_state(cls, state: dict[str, float]) -> RunningMoments:
        """Rebuild from `state()`."""
        return cls(mean=float(state["mean"]), var=float(state["var"]), count=float(state["count"]))
