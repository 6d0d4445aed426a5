"""Trainer sleep (OpenRLHF's `--deepspeed_enable_sleep`, `ds.enable_sleep`): between learn
steps the trainer's weights and optimizer state leave the GPU, so a colocated vLLM engine
can use that memory to generate; they come back before the next step, unchanged."""

from __future__ import annotations

import torch


def move_trainer(trainer, device: torch.device | str) -> None:
    """The trainer's model and optimizer state to `device`, in place (AdamW's step counters
    stay where they are: CPU scalars unless the optimizer is capturable)."""
    device = torch.device(device)
    trainer.model.to(device)
    optimizer = getattr(trainer, "optimizer", None)
    if optimizer is None:
        return
    for state in optimizer.state.values():
        for key, value in state.items():
            if torch.is_tensor(value) and key != "step":
                state[key] = value.to(device, non_blocking=True)
    if device.type == "cpu" and torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
