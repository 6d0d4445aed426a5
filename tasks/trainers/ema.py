"""An exponential moving average of the policy's weights (OpenRLHF's `--enable_ema`,
`--ema_beta`).

It starts as a copy of the policy's starting weights and, after every optimizer step of the
policy, moves as OpenRLHF's `moving_average` moves it:

    θ_ema ← (1 − β)·θ + β·θ_ema        (trained parameters only, in their own dtype)

The policy keeps training, sampling and syncing with its own weights; the EMA is what is
exported (the final HF folder and the `ckpt.save_hf` ones), as OpenRLHF saves its EMA model.
Unlike OpenRLHF's (rebuilt from the pretrained weights when a run is resumed), it is part of
the checkpoint (`ema.safetensors` beside the policy's), so a resumed run continues bitwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from torch import nn

from alignflow.errors import ConfigError

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store

FILE = "ema.safetensors"


class EMA:
    """The averaged copies of a model's trained parameters, by name, in host memory (as
    OpenRLHF offloads its EMA model), whatever device the model trains on."""

    def __init__(self, model: nn.Module, beta: float) -> None:
        self.beta = float(beta)
        self.params = {n: p.detach().to("cpu", copy=True) for n, p in _trained(model)}

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """One step: θ_ema ← (1 − β)·θ + β·θ_ema for every trained parameter."""
        for name, param in _trained(model):
            ema = self.params[name]
            ema.copy_((1 - self.beta) * param.detach().to(ema.device) + self.beta * ema)

    @contextlib.contextmanager
    @torch.no_grad()
    def applied(self, model: nn.Module) -> Iterator[nn.Module]:
        """The model with its trained parameters set to the EMA's, for an export; its own
        weights come back bitwise afterwards."""
        kept = {n: p.detach().clone() for n, p in _trained(model)}  # on the model's device
        try:
            for name, param in _trained(model):
                param.copy_(self.params[name])
            yield model
        finally:
            for name, param in _trained(model):
                param.copy_(kept[name])

    def save(self, store: Store, rel_dir: str) -> int:
        """Write `rel_dir/ema.safetensors`; returns its size."""
        data = save_tensors({n: t.contiguous().cpu() for n, t in self.params.items()})
        store.write_bytes(f"{rel_dir}/{FILE}", data)
        return len(data)

    def restore(self, store: Store, rel_dir: str) -> None:
        """Load what `save` wrote (same model, same names)."""
        try:
            saved = load_tensors(store.read_bytes(f"{rel_dir}/{FILE}"))
        except FileNotFoundError:
            raise ConfigError(f"{rel_dir}: no {FILE}; train.enable_ema must be as in the run "
                              "that wrote the checkpoint") from None
        if saved.keys() != self.params.keys():
            raise ConfigError(f"{rel_dir}/{FILE}: holds other parameters than the policy's; "
                              "expected the same model as the run that wrote it")
        for name, tensor in saved.items():
            self.params[name].copy_(tensor)


def _trained(model: nn.Module) -> Iterator[tuple[str, nn.Parameter]]:
    return ((n, p) for n, p in model.named_parameters() if p.requires_grad)
