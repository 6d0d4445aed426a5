"""bf16 parameters with fp32 master weights (`ds.param_dtype: bf16`), as DeepSpeed's bf16
mode holds them: the module computes in bf16 (half the parameter and gradient memory of
fp32 weights under autocast, and what a bf16 engine is sent), the optimizer steps fp32
copies of the trained parameters, which are cast back into the module after each step.

Checkpoints read and write the masters (`exposed`), so a resumed run continues bitwise;
syncs and exports read the bf16 module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

DTYPE = torch.bfloat16


class MasterWeights:
    """The fp32 masters of a model's trained parameters; the model itself cast to bf16
    (its parameters only: buffers such as rotary frequencies keep their dtype)."""

    def __init__(self, model: nn.Module) -> None:
        self.pairs: list[tuple[nn.Parameter, nn.Parameter]] = []
        for p in model.parameters():
            if not p.is_floating_point():
                continue
            if p.requires_grad:
                self.pairs.append((p, nn.Parameter(p.detach().float().clone())))
            p.data = p.data.to(DTYPE)

    @property
    def params(self) -> list[nn.Parameter]:
        """What the optimizer steps, in the model's parameter order."""
        return [m for _, m in self.pairs]

    def take_grads(self) -> None:
        """The module's bf16 gradients, as fp32, onto the masters (the module's freed)."""
        for p, m in self.pairs:
            m.grad = None if p.grad is None else p.grad.float()
            p.grad = None

    @torch.no_grad()
    def push(self) -> None:
        """The masters, rounded to bf16, into the module."""
        for p, m in self.pairs:
            p.copy_(m)

    @contextlib.contextmanager
    def exposed(self) -> Iterator[None]:
        """The fp32 masters stand in the module's parameters for the duration (what a
        checkpoint reads or restores); afterwards the module holds them in bf16 again."""
        kept = [p.data for p, _ in self.pairs]
        for p, m in self.pairs:
            p.data = m.data  # the module's parameter shares the master's storage
        try:
            yield
        finally:
            for (p, _), bf16 in zip(self.pairs, kept, strict=True):
                p.data = bf16
            self.push()
