"""Stop a learn step at the first non-finite loss, before it can reach the weights.

A NaN or inf loss backpropagates NaN into every gradient and, after the optimizer step,
into every weight: the run then goes on training garbage. The check runs on each
micro-batch's loss before `backward`, so the step that would apply it never happens; the
error names the iteration, the micro-batch and the values that went into the loss.
"""

from __future__ import annotations

import torch
from torch import Tensor

from alignflow.errors import AlignflowError


class NonFiniteLoss(AlignflowError, FloatingPointError):
    """A learn step's loss is NaN or inf; no update was applied (a user fault: the data, the
    learning rate or the loss settings; not retried)."""


def describe(value: Tensor | float, mask: Tensor | None = None) -> str:
    """`x` for a scalar; `[min, max]` of the finite (masked) entries plus how many are not
    finite, for a tensor."""
    if not isinstance(value, Tensor):
        return f"{value:.6g}"
    if value.dim() == 0:
        return f"{value.item():.6g}"
    picked = value.detach().float()
    if mask is not None:
        picked = picked[mask.bool()]
    bad = int((~torch.isfinite(picked)).sum())
    good = picked[torch.isfinite(picked)]
    span = f"[{good.min().item():.4g}, {good.max().item():.4g}]" if good.numel() else "[]"
    return span + (f" ({bad} not finite)" if bad else "")


def check_finite(loss: Tensor, *, iteration: int, what: str, samples: list[int],
                 parts: dict[str, Tensor | float], mask: Tensor | None = None) -> None:
    """Raise `NonFiniteLoss` naming the iteration and the values if `loss` is not finite."""
    if bool(torch.isfinite(loss.detach()).all()):
        return
    shown = ", ".join(f"{name} {describe(v, mask if isinstance(v, Tensor) and v.dim() else None)}"
                      for name, v in parts.items())
    first = f"samples {samples[0]}..{samples[-1]}" if samples else "no samples"
    raise NonFiniteLoss(f"iteration {iteration}: the {what} loss is {describe(loss)} on a "
                        f"micro-batch of {len(samples)} ({first}); {shown}; the learn step "
                        "stopped before any update (lower the learning rate, check rewards "
                        "and advantages)")
