"""Adapter-only checkpoints for a `TorchTrainer` training a LoRA model.

The base model is frozen and comes back from its own folder, so a checkpoint holds the
adapter tensors, AdamW state (which covers only the adapters), the scheduler, RNG and step:
megabytes instead of the whole model, and a restored trainer continues bitwise on CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from alignflow.artifacts import checkpoints
from alignflow.errors import ConfigError
from alignflow.tasks.modeling import lora

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store


def save(trainer: Any, store: Store, rel_dir: str, *, extra: dict | None = None,
         rng: bool | dict = True, state: dict | None = None) -> int:
    """Writes the adapter checkpoint; returns bytes written. `rng`, `state`: the RNG and
    adapter tensors captured earlier (a background write), else now."""
    _check(trainer, rel_dir)
    meta = {"global_step": trainer.global_step, "trainer": "torch", "adapter": "lora",
            **(extra or {})}
    state = lora.adapter_state(trainer.model) if state is None else state
    return checkpoints.save(store, rel_dir, state,
                            optimizer=trainer.optimizer, scheduler=trainer.scheduler,
                            rng=rng, extra=meta)


def restore(trainer: Any, store: Store, rel_dir: str) -> dict:
    """Loads an adapter checkpoint into a trainer built on the same base and LoRA config."""
    _check(trainer, rel_dir)
    ckpt = checkpoints.load(store, rel_dir)
    require_written_by_torch(ckpt.extra, rel_dir)
    if ckpt.extra.get("adapter") != "lora":
        raise ConfigError(f"{rel_dir}: not an adapter checkpoint (full weights); expected one "
                          "written by adapter_checkpoint.save")
    lora.load_adapter_state(trainer.model, ckpt.model_state)
    trainer.optimizer.load_state_dict(ckpt.optimizer_state)
    trainer.scheduler.load_state_dict(ckpt.scheduler_state)
    ckpt.restore_rng()
    trainer.global_step = int(ckpt.extra.get("global_step", 0))
    return ckpt.extra


def require_written_by_torch(extra: dict, rel_dir: str) -> None:
    """A DeepSpeed checkpoint's optimizer is sharded per rank: the PyTorch trainer refuses it
    rather than silently starting fresh AdamW moments."""
    if extra.get("trainer", "torch") != "torch":
        raise ConfigError(f"{rel_dir}: written by the {extra['trainer']!r} trainer; expected "
                          "ds.trainer / ds.zero_stage as in the run that wrote it")


def _check(trainer: Any, rel_dir: str) -> None:
    if not lora.is_lora(trainer.model):
        raise ConfigError(f"{rel_dir}: the trainer's model has no LoRA adapter; expected a "
                          "model from lora.wrap")
