"""The DeepSpeed trainer: `Trainer` on DeepSpeed ZeRO 0-3, optionally with DeepSpeedCPUAdam.

Same semantics as `TorchTrainer`: one `step(micro_batches, loss_fn, weights=)` is one
optimizer step that back-propagates `Σ weights[i]·loss_i`, clips to `max_norm` (reporting the
norm before clipping), and follows the same warmup-cosine LR; AdamW has no decay on 1-D
params; bf16 under ZeRO is DeepSpeed's bf16 mode (a bf16 module, fp32 master partitions in
its optimizer; stage 0 autocasts fp32 weights); activation checkpointing is
non-reentrant. alignflow builds the optimizer and schedule and marks the accumulation
boundary itself, so a step may have any number of micro-batches.

`loss_fn(model, batch)` receives the DeepSpeed engine, which passes attribute access through
to the model: call the model (its forward) so ZeRO's backward hooks run. `trainer.model` is
the bare module; under ZeRO-3 its parameters are shards, so read weights through
`state_dict_for_sync()` (gathered) rather than `model.state_dict()`.

Processes: the trainer joins the existing torch.distributed group (torchrun's, or one formed
among Ray actors by `tasks.distributed`) and otherwise makes a world of one on loopback.
As with `TorchTrainer`, gradients are *summed* over ranks (DeepSpeed averages, so each
backward is scaled by the world size): normalise each rank's loss by the global count
(`tasks.distributed.reduce`) and the step equals one worker on the whole batch.
A LoRA model (`modeling.lora.wrap`) keeps adapter-only checkpoints, syncs merged weights
and exports peft's adapter folder, also under ZeRO-3 (gathered first).
On CPU set `DS_ACCELERATOR=cpu` (done here when CUDA is absent); DeepSpeedCPUAdam compiles on
first use (about a minute), cached under `TORCH_EXTENSIONS_DIR`.

Checkpoints (`deepspeed_checkpoint`): full weights + schedule + extra at the top, each rank's
optimizer shard and RNG beside them. Same world size and stage: resumes bitwise on CPU.
Another world size or ZeRO stage: `restore` raises `ConfigError` (the shards cannot be
re-cut), and `restore(..., optimizer=False)` continues from the weights, schedule and step
with fresh AdamW moments. Another backend or device (gloo on CPU → NCCL on GPU) restores
fine (tensors are stored on the CPU) but is not bitwise, as the kernels differ.
A `TorchTrainer` checkpoint loads only with `optimizer=False`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from alignflow.errors import ConfigError
from alignflow.tasks.distributed import group
from alignflow.tasks.modeling import lora
from alignflow.tasks.trainers.base import Batch, LossFn, TrainerConfig, micro_batch_weights
from alignflow.tasks.trainers.cpu_adam import cpu_adam
from alignflow.tasks.trainers.deepspeed import checkpoint as ds_ckpt
from alignflow.tasks.trainers.deepspeed.config import (
    bf16_module,
    ds_config,
    import_deepspeed,
    muon_section,
)
from alignflow.tasks.trainers.deepspeed.section import DSConfig
from alignflow.tasks.trainers.muon import adamw, lr_schedule
from alignflow.tasks.trainers.torch_trainer import enable_checkpointing

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store

deepspeed = import_deepspeed()


class DeepSpeedTrainer:
    """Implements `trainers.base.Trainer` on a DeepSpeed engine (one rank of a group)."""

    def __init__(self, model: nn.Module, cfg: TrainerConfig, ds: DSConfig | None = None, *,
                 overrides: dict | None = None) -> None:
        """`ds`: the `ds` section (ZeRO stage, offload, overlap; default ZeRO-2);
        `overrides`: DeepSpeed's own knobs merged into its config (`ds_config`)."""
        self.cfg, self.ds = cfg, ds or DSConfig(trainer="deepspeed")
        join_deepspeed()
        self.global_step = 0
        if cfg.gradient_checkpointing:
            enable_checkpointing(model)
        model.train()
        config = ds_config(cfg, self.ds, pin_memory=torch.cuda.is_available(),
                           overrides=overrides, **param_counts(model))
        if cfg.optim == "muon":  # DeepSpeed's own Muon: its ZeRO partitions keep matrices whole
            config["optimizer"] = muon_section(cfg)
            optimizer, params = None, self._decay_groups(model)
        else:
            optimizer, params = self._optimizer(model), None
        self.engine, _, _, self.scheduler = deepspeed.initialize(
            model=model, optimizer=optimizer, model_parameters=params,
            lr_scheduler=self._schedule, config=config)
        self.model = self.engine.module

    def _decay_groups(self, model: nn.Module) -> list[dict[str, Any]]:
        """The trained tensors in two groups: decayed (>= 2-D) and not (1-D), as TorchTrainer;
        DeepSpeed's Muon splits each group again into its Muon and AdamW halves."""
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.ndim >= 2],
                   "weight_decay": self.cfg.weight_decay},
                  {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
        return [g for g in groups if g["params"]]

    def _schedule(self, optimizer: torch.optim.Optimizer):
        """Warmup then cosine, over whichever optimizer DeepSpeed ends up stepping."""
        return lr_schedule(optimizer, self.cfg)

    def _optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        """AdamW over the two decay groups (no decay on 1-D params), as TorchTrainer has it."""
        groups = self._decay_groups(model)
        kw = dict(lr=self.cfg.lr, betas=self.cfg.betas, eps=self.cfg.eps)
        if self.ds.adam_offload:
            return cpu_adam(groups, **kw)  # says first where and how long its build takes
        return adamw(groups, lr=self.cfg.lr, betas=self.cfg.betas, eps=self.cfg.eps)

    @property
    def zero_stage(self) -> int:
        return self.engine.zero_optimization_stage()

    @property
    def lr(self) -> float:
        """The learning rate the next `step` will use."""
        return float(ds_ckpt.base_optimizer(self.engine).param_groups[0]["lr"])

    def _autocast(self):
        """bf16 under ZeRO: the module is bf16 already (DeepSpeed's bf16 mode); stage 0
        autocasts its fp32 weights."""
        if self.cfg.dtype != "bf16" or bf16_module(self.cfg, self.ds):
            return contextlib.nullcontext()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        return torch.autocast(device_type=device, dtype=torch.bfloat16)

    def step(self, micro_batches: Sequence[Batch], loss_fn: LossFn, *,
             weights: Sequence[float] | None = None) -> dict[str, float]:
        """Backward `weights[i] * loss_i` per micro-batch (default 1/M), clip, one optimizer step.

        Every rank of a data-parallel group must call it with the same number of
        micro-batches (ZeRO reduces gradients collectively).
        """
        if not micro_batches:
            raise ConfigError("DeepSpeedTrainer.step: got no micro-batches; expected at least one")
        weights = micro_batch_weights("DeepSpeedTrainer", len(micro_batches), weights)
        world = group.rank_and_size()[1]  # DeepSpeed averages over ranks; we sum
        self.engine.train()
        lr = self.lr
        totals: dict[str, float] = {}
        for i, (batch, w) in enumerate(zip(micro_batches, weights, strict=True)):
            self.engine.set_gradient_accumulation_boundary(i == len(micro_batches) - 1)
            if hasattr(self.engine.optimizer, "clear_backward_seen_flag"):
                self.engine.optimizer.clear_backward_seen_flag()  # as engine.forward does
            with self._autocast():
                loss, metrics = loss_fn(self.engine, batch)
            self.engine.backward(loss.float() * (w * world), scale_wrt_gas=False)
            for key, value in {"loss": loss.item(), **metrics}.items():
                totals[key] = totals.get(key, 0.0) + w * float(value)
        grad_norm = self._clip_stage0() if self.zero_stage == 0 else None
        self.engine.step()
        if grad_norm is None:
            grad_norm = float(self.engine.get_global_grad_norm())
        self.global_step += 1
        return {**totals, "grad_norm": grad_norm, "lr": lr, "step": float(self.global_step)}

    def _clip_stage0(self) -> float:
        """Stage 0 (plain data parallel): gradients are reduced by now; clip like TorchTrainer."""
        max_norm = self.cfg.max_norm if self.cfg.max_norm > 0 else float("inf")
        params = [p for p in self.model.parameters() if p.grad is not None]
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))

    def state_dict_for_sync(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Full named tensors (ZeRO-3 shards gathered and streamed one at a time; a LoRA
        model's merged weights under plain HF names); collective: every rank iterates it
        (or `take_part_in_sync`)."""
        yield from self._sync_state(keep=True)

    def take_part_in_sync(self) -> None:
        """The gathers of the driving rank's `state_dict_for_sync`, keeping nothing."""
        for _ in self._sync_state(keep=False):
            pass

    def _sync_state(self, *, keep: bool) -> Iterator[tuple[str, torch.Tensor]]:
        """LoRA: the (small) adapters first, then the base streamed with their deltas."""
        if not lora.is_lora(self.model):
            yield from ds_ckpt.full_state(self.engine, keep=keep)
            return
        adapters = dict(ds_ckpt.full_state(self.engine, keep=keep, only=ds_ckpt.adapter_names))
        base = ds_ckpt.full_state(self.engine, keep=keep, only=ds_ckpt.base_names)
        yield from lora.merged_state(self.model, base, adapters=adapters) if keep else base

    def save(self, store: Store, rel_dir: str, *, extra: dict | None = None) -> int:
        """Collective checkpoint (see module docstring); returns bytes written by all ranks."""
        meta = {"global_step": self.global_step, **(extra or {})}
        return ds_ckpt.save(self.engine, self.scheduler, store, rel_dir, meta)

    def restore(self, store: Store, rel_dir: str, *, optimizer: bool = True) -> dict:
        """Loads a `save`d checkpoint; `optimizer=False` keeps fresh AdamW moments."""
        extra = ds_ckpt.restore(self.engine, self.scheduler, store, rel_dir, optimizer=optimizer)
        self.global_step = int(extra.get("global_step", 0))
        return extra

    def save_pretrained(self, folder: str, tokenizer: Any = None) -> None:
        """A plain HF folder from the gathered weights (peft's adapter folder for a LoRA
        model), written by rank 0 (collective)."""
        rank, world = group.rank_and_size()
        only = ds_ckpt.adapter_names if lora.is_lora(self.model) else None
        state = dict(ds_ckpt.full_state(self.engine, keep=rank == 0, only=only, device="cpu"))
        if rank == 0:
            self.model.save_pretrained(folder, state_dict=state)
            if tokenizer is not None:
                tokenizer.save_pretrained(folder)
        if world > 1:
            torch.distributed.barrier()


def param_counts(model: nn.Module) -> dict[str, int]:
    """Trainable and total elements, whole: a ZeRO-3 partitioned parameter (built under
    `zero.Init`) holds an empty tensor and its size in `ds_numel`."""
    sizes = [(getattr(p, "ds_numel", p.numel()), p.requires_grad) for p in model.parameters()]
    return {"trainable": sum(n for n, grad in sizes if grad), "params": sum(n for n, _ in sizes)}


def join_deepspeed() -> None:
    """This rank's group (torchrun's, a Ray group's, else a world of one: NCCL + gloo with
    CUDA, `group.GPU_BACKEND`), adopted by DeepSpeed."""
    group.ensure_group(None)
    deepspeed.init_distributed(dist_backend=torch.distributed.get_backend())

