"""DeepSpeed trainer checkpoints in alignflow's format: safetensors + JSON, never torch.save.

A folder holds, like a `TorchTrainer` checkpoint, the *full* model weights (gathered from
ZeRO-3 shards), the LR scheduler and `extra` (`artifacts.checkpoints`); beside them, one
sub-folder per rank, `ranks/rank-NNNNN/`, holds that rank's optimizer: the fp32 master shard
it steps (ZeRO 1-3), the AdamW moments of that shard, and the rank's RNG. Rank folders are
written first and the top-level `meta.json` last, so a folder is complete once `load` opens it.

A LoRA model's folder holds the adapter tensors only (the frozen base comes back from its
own folder), like `adapter_checkpoint` does for the PyTorch trainer.

Restoring on the same world size and ZeRO stage puts back every tensor the next step reads,
so training continues bitwise on CPU. The master shards are cut by DeepSpeed's flat-buffer
layout, which depends on the world size and stage: other values raise `ConfigError`, unless
`optimizer=False` asks for the weights, schedule and step only (fresh AdamW moments).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from alignflow.artifacts import checkpoints
from alignflow.errors import ConfigError
from alignflow.tasks.distributed.group import rank_and_size
from alignflow.tasks.distributed.reduce import global_sum
from alignflow.tasks.modeling import lora
from alignflow.tasks.trainers.deepspeed.config import import_deepspeed

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store

zero = import_deepspeed().zero

TRAINER_NAME = "deepspeed"


def _is_partitioned(t: torch.Tensor) -> bool:
    return hasattr(t, "ds_id")


def adapter_names(name: str) -> bool:
    """The entries of a LoRA model's state_dict that its checkpoints hold."""
    return "lora_" in name


def base_names(name: str) -> bool:
    """The entries of a LoRA model's state_dict that are not its adapters."""
    return "lora_" not in name


def full_state(engine: Any, *, keep: bool = True, only: Callable[[str], bool] | None = None,
               device: torch.device | str | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """The module's state_dict with ZeRO-3 shards gathered one parameter at a time, each
    yielded as soon as it is gathered (a copy, on `device`: default the parameter's own;
    "cpu" for a save), so a sync or save holds one gathered parameter (and what its
    consumer keeps, e.g. a bucket) instead of a second whole model. A weight tied under
    several names is gathered once and held until its last name.

    Collective under ZeRO-3: every rank must iterate it. `keep=False` still takes part in
    the gathers but yields nothing (ranks that do not write); `only(name)` picks entries.
    """
    named = [(n, t) for n, t in engine.module.state_dict(keep_vars=True).items()
             if only is None or only(n)]
    uses = Counter(id(t) for _, t in named if _is_partitioned(t))
    held: dict[int, torch.Tensor | None] = {}
    for name, t in named:
        if not _is_partitioned(t):
            if keep:
                yield name, t.detach() if device is None else t.detach().to(device)
            continue
        key = id(t)
        if key not in held:
            with zero.GatheredParameters([t], modifier_rank=None):
                held[key] = t.detach().to(device or t.device, copy=True) if keep else None
        value = held[key] if uses[key] > 1 else held.pop(key)
        uses[key] -= 1
        if uses[key] == 0:
            held.pop(key, None)
        if keep:
            yield name, value


def load_full_state(engine: Any, state: dict[str, torch.Tensor]) -> None:
    """Copies full weights (a LoRA model's adapters) into the module; ZeRO-3 shards are
    re-cut from rank 0's copy."""
    module = engine.module
    own = module.state_dict(keep_vars=True)
    if lora.is_lora(module):
        own = {k: v for k, v in own.items() if adapter_names(k)}
    missing = sorted(set(own) - set(state))
    if missing:
        raise ConfigError(f"checkpoint lacks {len(missing)} weights of this model "
                          f"(first: {missing[0]!r}); expected the same model class and config")
    with torch.no_grad():
        for name, t in own.items():
            if _is_partitioned(t):
                with zero.GatheredParameters([t], modifier_rank=0):
                    t.data.copy_(state[name])
            else:
                t.data.copy_(state[name])


def base_optimizer(engine: Any) -> torch.optim.Optimizer:
    """The torch optimizer that really steps: the client's under stage 0, ZeRO's inner one else."""
    opt = engine.optimizer
    return opt if engine.zero_optimization_stage() == 0 else opt.optimizer


def _masters(engine: Any) -> list[torch.Tensor]:
    """This rank's fp32 master shards in a fixed order (ZeRO 1-3; stage 0 has none: it steps
    the module's own weights). ZeRO-3 swaps its shards in and out of the inner optimizer's
    param groups around each step, so they are read from the ZeRO optimizer itself."""
    stage = engine.zero_optimization_stage()
    if stage == 0:
        return []
    if stage == 3:
        return list(engine.optimizer.fp32_partitioned_groups_flat)
    return [p for group in base_optimizer(engine).param_groups for p in group["params"]]


def _optimizer_tree(engine: Any) -> dict[str, Any]:
    """The inner optimizer's state as a plain tree (tensors are stored by `checkpoints`)."""
    opt = base_optimizer(engine)
    if engine.zero_optimization_stage() == 0:
        return opt.state_dict()
    return {"moments": [opt.state.get(m) for m in _masters(engine)],
            "groups": [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]}


def _load_optimizer_tree(engine: Any, tree: dict[str, Any],
                         masters: dict[str, torch.Tensor]) -> None:
    opt = base_optimizer(engine)
    if engine.zero_optimization_stage() == 0:
        opt.load_state_dict(tree)
        return
    with torch.no_grad():
        for i, (master, moments) in enumerate(zip(_masters(engine), tree["moments"], strict=True)):
            master.copy_(masters[f"master/{i}"])
            if moments is not None:
                opt.state[master] = {k: v.clone() if torch.is_tensor(v) else v
                                     for k, v in moments.items()}
    for group, saved in zip(opt.param_groups, tree["groups"], strict=True):
        group.update(saved)


def _rank_dir(rel_dir: str, rank: int) -> str:
    return f"{rel_dir}/ranks/rank-{rank:05d}"


def layout(engine: Any) -> dict[str, Any]:
    """What a checkpoint's optimizer shards depend on (checked on restore)."""
    rank, world = rank_and_size()
    return {"trainer": TRAINER_NAME, "world_size": world,
            "zero_stage": engine.zero_optimization_stage(),
            "backend": dist.get_backend() if dist.is_initialized() else None}


def save(engine: Any, scheduler: Any, store: Store, rel_dir: str, extra: dict[str, Any]) -> int:
    """Collective: every rank writes its shard, then rank 0 the full weights. Returns bytes."""
    rank, world = rank_and_size()
    masters = {f"master/{i}": m for i, m in enumerate(_masters(engine))}
    nbytes = checkpoints.save(store, _rank_dir(rel_dir, rank), masters, rng=True,
                              extra={"rank": rank, **layout(engine),
                                     "optimizer": _optimizer_tree(engine)})
    only = adapter_names if lora.is_lora(engine.module) else None
    weights = dict(full_state(engine, keep=rank == 0, only=only, device="cpu"))
    if world > 1:
        dist.barrier()
    if rank == 0:
        nbytes += checkpoints.save(store, rel_dir, weights, scheduler=scheduler, rng=False,
                                   extra={**extra, **layout(engine)})
    if world > 1:
        nbytes = int(global_sum(nbytes))
        dist.barrier()
    return nbytes


def _check_layout(rel_dir: str, saved: dict[str, Any], now: dict[str, Any]) -> None:
    if saved.get("trainer") != TRAINER_NAME:
        raise ConfigError(f"{rel_dir}: written by the {saved.get('trainer')!r} trainer, whose "
                          "optimizer state DeepSpeed cannot read; restore with optimizer=False")
    for key in ("world_size", "zero_stage"):
        if saved.get(key) != now[key]:
            raise ConfigError(
                f"{rel_dir}: saved with {key}={saved.get(key)}, this trainer has {key}="
                f"{now[key]}; optimizer shards follow DeepSpeed's layout for one world size "
                "and stage: use the same, or restore with optimizer=False (fresh AdamW state)")


def restore(engine: Any, scheduler: Any, store: Store, rel_dir: str, *,
            optimizer: bool = True) -> dict[str, Any]:
    """The inverse of `save` (collective under ZeRO-3); returns the saved `extra`."""
    ckpt = checkpoints.load(store, rel_dir)
    if optimizer:
        _check_layout(rel_dir, ckpt.extra, layout(engine))
    load_full_state(engine, ckpt.model_state)
    if ckpt.scheduler_state is not None:
        scheduler.load_state_dict(ckpt.scheduler_state)
    if not optimizer:
        _fresh_optimizer(engine, scheduler)
        return ckpt.extra
    shard = checkpoints.load(store, _rank_dir(rel_dir, rank_and_size()[0]))
    _load_optimizer_tree(engine, shard.extra["optimizer"], shard.model_state)
    shard.restore_rng()
    return ckpt.extra


def _fresh_optimizer(engine: Any, scheduler: Any) -> None:
    """Weights-only restore: masters re-cut from the loaded weights, LR from the schedule."""
    if engine.zero_optimization_stage() > 0:
        engine.optimizer.refresh_fp32_params()
    for group, lr in zip(base_optimizer(engine).param_groups, scheduler.get_last_lr(),
                         strict=False):
        group["lr"] = lr
