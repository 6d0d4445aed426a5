"""Trainer sleep (OpenRLHF's `--deepspeed_enable_sleep`, `ds.enable_sleep`): between learn
steps the trainer's weights and optimizer state leave the GPU, so a colocated vLLM engine
can use that memory to generate; they come back before the next step, unchanged.

Under ZeRO (stages 1-3) the module's parameters are views into DeepSpeed's flat buffers,
and the optimizer steps fp32 master partitions and Adam moments that DeepSpeed holds apart
from the module: moving the module frees none of them. DeepSpeed moves its own states
(`engine.offload_states` / `reload_states`, DeepSpeed >= 0.16): master weights, the bit16
parameters' flat buffer, gradient partitions, its contiguous gradient buffer, Adam moments.
Its ZeRO-3 path moves master weights and moments only for its own FusedAdam; alignflow's
ZeRO-3 optimizer is torch's AdamW, so those two move here the way DeepSpeed's stage 1/2
path moves them (the same tensors, `.data` swapped, nothing else holds them).
"""

from __future__ import annotations

import torch

HOST = "cpu"


def sleep_trainer(trainer) -> None:
    """The trainer's weights and optimizer state to the host, in place."""
    _move(trainer, torch.device(HOST), asleep=True)


def wake_trainer(trainer, device: torch.device | str) -> None:
    """Undoes `sleep_trainer`: everything back on the trainer's `device`."""
    _move(trainer, torch.device(device), asleep=False)


def _move(trainer, device: torch.device, *, asleep: bool) -> None:
    """AdamW's step counters stay where they are (CPU scalars)."""
    engine = getattr(trainer, "engine", None)
    if engine is not None and engine.zero_optimization_stage() > 0:
        _move_zero(engine, to_host=asleep)
    else:
        optimizer = getattr(trainer, "optimizer", None) or getattr(engine, "optimizer", None)
        trainer.model.to(device)
        masters = getattr(trainer, "masters", None)  # bf16: the fp32 weights AdamW steps
        for master in masters.params if masters is not None else ():
            master.data = master.data.to(device)
        if optimizer is not None:
            _move_moments(optimizer, device)
    if asleep and torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _move_zero(engine, *, to_host: bool) -> None:
    from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum, OffloadStateTypeEnum

    ours = _moved_here(engine)
    if to_host:
        include = [s for s in OffloadStateTypeEnum if s.value not in ours]
        engine.offload_states(include=include, device=OffloadDeviceEnum.cpu, pin_memory=True)
    else:
        engine.reload_states()
    if ours:
        device = torch.device(HOST) if to_host else _accelerator_device()
        for flat in engine.optimizer.fp32_partitioned_groups_flat:
            flat.data = flat.data.to(device)
        _move_moments(engine.optimizer.optimizer, device)


def _moved_here(engine) -> frozenset[str]:
    """The states moved here rather than by DeepSpeed: ZeRO-3's master weights and Adam
    moments when its optimizer is not DeepSpeed's FusedAdam (nothing to move when they
    live on the CPU already: ds.adam_offload)."""
    if engine.zero_optimization_stage() != 3 or engine.zero_use_cpu_optimizer():
        return frozenset()
    from deepspeed.ops.adam.fused_adam import FusedAdam

    if isinstance(engine.optimizer.optimizer, FusedAdam):
        return frozenset()
    return frozenset({"hp_params", "optim_states"})


def _move_moments(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    for state in optimizer.state.values():
        for key, value in state.items():
            if torch.is_tensor(value) and key != "step":
                state[key] = value.to(device, non_blocking=True)


def _accelerator_device() -> torch.device:
    from deepspeed.accelerator import get_accelerator

    return torch.device(get_accelerator().current_device_name())
