"""What every policy-loss variant reads: the clip bounds, the dual clip and the variants'
own knobs (`actor.policy_loss.*`: `losses/knobs.py`), in one frozen record, so that every
variant has the same signature `fn(logp, old_logp, adv, mask, s: Surrogate) -> (B, T)`."""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.tasks.losses.knobs import PolicyLossKnobs


@dataclass(frozen=True, kw_only=True)
class Surrogate:
    """The trust region of one loss call: ratios clipped to [1 − eps_low, 1 + eps_high]
    (for DPPO: the divergence bounds), the dual clip c (None: off), the variants' knobs."""

    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip: float | None = None
    knobs: PolicyLossKnobs = field(default_factory=PolicyLossKnobs)
