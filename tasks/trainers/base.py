"""The trainer contract shared by the plain PyTorch trainer and (later) DeepSpeed ZeRO.

A learn step builds micro-batches and a loss function; the trainer owns the model, the
optimizer, the LR schedule, precision and checkpoints. One `step` call = one optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch
from torch import nn

from alignflow.tasks.trainers.config import Precision as Precision  # re-exported
from alignflow.tasks.trainers.config import TrainerConfig as TrainerConfig  # re-exported

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store

Batch = Mapping[str, Any]
LossFn = Callable[[nn.Module, Batch], tuple[torch.Tensor, dict[str, float]]]
@runtime_checkable
class Trainer(Protocol):
    """What learn steps and the weight-sync step rely on."""

    model: nn.Module
    global_step: int

    def step(self, micro_batches: Sequence[Batch], loss_fn: LossFn, *,
             weights: Sequence[float] | None = None) -> dict[str, float]:
        """One optimizer step; `sum(weights[i] * loss_i)` is back-propagated (default 1/M each)."""
        ...

    def state_dict_for_sync(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Named full tensors for `GenerationEngine.update_weights`."""
        ...

    def take_part_in_sync(self) -> None:
        """On a rank that drives no engine: the collectives `state_dict_for_sync` makes on
        the driving rank (ZeRO-3's gathers), nothing else."""
        ...

    def save(self, store: Store, rel_dir: str, *, extra: dict | None = None) -> None:
        """Model, optimizer, scheduler, RNG and step count → a checkpoint dir in the store."""
        ...

    def restore(self, store: Store, rel_dir: str) -> dict:
        """The inverse of `save`; returns the `extra` saved with it."""
        ...

    def save_pretrained(self, folder: str, tokenizer: Any = None) -> None:
        """A plain HF folder (safetensors) for serving or a next stage."""
        ...


def micro_batch_weights(trainer: str, m: int, weights: Sequence[float] | None) -> list[float]:
    """Each micro-batch's share of the step's loss: equal by default, else one given per
    micro-batch (`trainer` names the caller in the error)."""
    if weights is None:
        return [1.0 / m] * m
    if len(weights) != m:
        from alignflow.errors import ConfigError

        raise ConfigError(f"{trainer}.step: {len(weights)} weights for {m} micro-batches; "
                          "expected one weight per micro-batch")
    return [float(w) for w in weights]
