"""The plain PyTorch trainer: AdamW, warmup-cosine LR, accumulation, clipping, bf16 autocast.

One device per process. Everything it owns (weights, AdamW moments, scheduler position,
RNG, step count) goes into the checkpoint, so on CPU a restored trainer continues bitwise
as if it had never stopped. A LoRA model (`modeling.lora.wrap`) checkpoints its adapters
only (`adapter_checkpoint`), syncs merged weights and exports the adapter folder.

In a torch.distributed group (a data-parallel worker group) every rank holds the whole
model; gradients are summed over ranks before clipping (one flat all-reduce), so a loss
normalised by the global count gives the one-worker gradient; rank 0 alone writes
checkpoints and exports (the ranks' weights are equal).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from alignflow.artifacts import checkpoints
from alignflow.errors import ConfigError
from alignflow.tasks.distributed.group import rank_and_size
from alignflow.tasks.modeling import lora
from alignflow.tasks.trainers import adapter_checkpoint, muon
from alignflow.tasks.trainers.base import Batch, LossFn, TrainerConfig, micro_batch_weights
from alignflow.tasks.trainers.master_weights import MasterWeights

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store


class TorchTrainer:
    """Implements `trainers.base.Trainer` with torch.optim.AdamW on the model's device."""

    def __init__(self, model: nn.Module, cfg: TrainerConfig) -> None:
        self.cfg = cfg
        self.model = model.train()
        self.global_step = 0
        self._held: Future | None = None
        if cfg.gradient_checkpointing:
            enable_checkpointing(model)
        # bf16: the module in bf16, fp32 masters stepped by AdamW (`master_weights`)
        self.masters = MasterWeights(model) if cfg.dtype == "bf16" else None
        self.optimizer = muon.build(self._named_trained(), cfg)  # AdamW, or Muon + AdamW
        self.scheduler = muon.lr_schedule(self.optimizer, cfg)

    def _named_trained(self) -> list[tuple[str, nn.Parameter]]:
        """The stepped tensors (`_trained`) under their module names (Muon's split reads them)."""
        if self.masters is None:
            return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        names = {id(p): n for n, p in self.model.named_parameters()}
        return [(names[id(p)], m) for p, m in self.masters.pairs]

    def _autocast(self):
        if self.cfg.dtype != "bf16":
            return contextlib.nullcontext()
        device = next(self.model.parameters()).device.type
        return torch.autocast(device_type=device, dtype=torch.bfloat16)

    @property
    def lr(self) -> float:
        """The learning rate the next `step` will use."""
        return float(self.optimizer.param_groups[0]["lr"])

    def step(self, micro_batches: Sequence[Batch], loss_fn: LossFn, *,
             weights: Sequence[float] | None = None) -> dict[str, float]:
        """Backward `weights[i] * loss_i` per micro-batch (default 1/M), clip, one AdamW step.

        With equal-size micro-batches and per-sample mean losses the default weights make
        M accumulated micro-batches equal one big batch; for token means pass each
        micro-batch's share of the tokens.
        """
        if not micro_batches:
            raise ConfigError("TorchTrainer.step: got no micro-batches; expected at least one")
        weights = micro_batch_weights("TorchTrainer", len(micro_batches), weights)
        self.settle()
        self.model.train()
        lr = self.lr
        totals: dict[str, float] = {}
        for batch, w in zip(micro_batches, weights, strict=True):
            with self._autocast():
                loss, metrics = loss_fn(self.model, batch)
            (loss.float() * w).backward()
            for key, value in {"loss": loss.item(), **metrics}.items():
                totals[key] = totals.get(key, 0.0) + w * float(value)
        if self.masters is not None:
            self.masters.take_grads()
        sum_gradients_over_ranks(self._trained())
        grad_norm = self._clip()
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.masters is not None:
            self.masters.push()
        self.global_step += 1
        return {**totals, "grad_norm": grad_norm, "lr": lr, "step": float(self.global_step)}

    def _trained(self) -> list[nn.Parameter]:
        """The tensors AdamW steps: the trained parameters, or their fp32 masters."""
        if self.masters is not None:
            return self.masters.params
        return [p for p in self.model.parameters() if p.requires_grad]

    def _clip(self) -> float:
        max_norm = self.cfg.max_norm if self.cfg.max_norm > 0 else float("inf")
        params = [p for p in self._trained() if p.grad is not None]
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))

    def _exposed(self):
        """The fp32 masters in the module while a checkpoint reads or restores it."""
        return self.masters.exposed() if self.masters is not None else contextlib.nullcontext()

    def state_dict_for_sync(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Named tensors for `GenerationEngine.update_weights` (views, no copies); a LoRA
        model's base with the adapters folded in, under plain HF names."""
        if lora.is_lora(self.model):
            yield from lora.merged_state(self.model)
        else:
            yield from self.model.state_dict().items()

    def take_part_in_sync(self) -> None:
        """Every rank holds the whole model: the driving rank's sync needs no one else."""

    def save(self, store: Store, rel_dir: str, *, extra: dict | None = None) -> int:
        """Checkpoint everything needed to continue bitwise; returns bytes written (rank 0
        writes, other ranks of a group return 0)."""
        return self.snapshot(extra=extra)(store, rel_dir)

    def snapshot(self, *, extra: dict | None = None) -> Callable[[Any, str], int]:
        """Capture now what changes outside training (RNG, step count) and return the
        writer of the checkpoint. The writer reads the live weights and AdamW moments, so it
        may run on another thread while other tasks run, as long as the trainer does not
        train meanwhile: `hold(future)` makes `step`/`restore` wait for it. A LoRA model's
        checkpoint holds the adapters only; ranks other than 0 write nothing."""
        self.settle()
        if rank_and_size()[0] != 0:
            return lambda store, rel_dir: 0
        if lora.is_lora(self.model):
            rng, extra = checkpoints.rng_state(), dict(extra or {})
            with self._exposed():
                state = lora.adapter_state(self.model)
            return lambda store, rel_dir: adapter_checkpoint.save(
                self, store, rel_dir, extra=extra, rng=rng, state=state)
        meta = {"global_step": self.global_step, "trainer": "torch", **(extra or {})}
        with self._exposed():  # views of the fp32 masters, which no step changes meanwhile
            rng, state = checkpoints.rng_state(), self.model.state_dict()

        def write(store: Store, rel_dir: str) -> int:
            return checkpoints.save(store, rel_dir, state, optimizer=self.optimizer,
                                    scheduler=self.scheduler, rng=rng, extra=meta)
        return write

    def hold(self, future: Future) -> None:
        """Do not change the weights until `future` (a snapshot's writer) is done."""
        self._held = future

    def settle(self) -> None:
        """Wait for a held checkpoint write (its error, if any, is raised here)."""
        held, self._held = self._held, None
        if held is not None:
            held.result()

    def restore(self, store: Store, rel_dir: str) -> dict:
        """Loads a `save`d checkpoint into this trainer (same model class and config)."""
        self.settle()
        with self._exposed():
            return self._restore(store, rel_dir)

    def _restore(self, store: Store, rel_dir: str) -> dict:
        if lora.is_lora(self.model):
            return adapter_checkpoint.restore(self, store, rel_dir)
        ckpt = checkpoints.load(store, rel_dir)
        adapter_checkpoint.require_written_by_torch(ckpt.extra, rel_dir)
        if ckpt.extra.get("adapter"):
            raise ConfigError(f"{rel_dir}: holds LoRA adapters only; expected ds.lora.rank as "
                              "in the run that wrote it")
        self.model.load_state_dict(ckpt.model_state)
        if ckpt.optimizer_state is not None:
            self.optimizer.load_state_dict(ckpt.optimizer_state)
        if ckpt.scheduler_state is not None:
            self.scheduler.load_state_dict(ckpt.scheduler_state)
        ckpt.restore_rng()
        self.global_step = int(ckpt.extra.get("global_step", 0))
        return ckpt.extra

    def save_pretrained(self, folder: str, tokenizer: Any = None) -> None:
        """A plain HF folder (safetensors) that `from_pretrained` and the engines load; for
        a LoRA model peft's adapter folder (`alignflow export --merge-lora` merges it)."""
        self.model.save_pretrained(folder)
        if tokenizer is not None:
            tokenizer.save_pretrained(folder)


def enable_checkpointing(model: nn.Module) -> None:
    """Recompute activations in backward (non-reentrant); the API was renamed in transformers 5."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def sum_gradients_over_ranks(params: list[nn.Parameter]) -> None:
    """In a group of N > 1 ranks every gradient becomes its sum over the ranks (one flat
    all-reduce); alone, nothing happens."""
    if rank_and_size()[1] == 1:
        return
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    offset = 0
    for g in grads:
        g.copy_(flat[offset: offset + g.numel()].view_as(g))
        offset += g.numel()

