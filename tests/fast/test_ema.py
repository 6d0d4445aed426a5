"""The policy's EMA (`train.enable_ema`, `train.ema_beta`; OpenRLHF's `--enable_ema`,
`--ema_beta`) against OpenRLHF v0.11.0 `utils/deepspeed/deepspeed.py` `moving_average`:
for every parameter with requires_grad, ema ← (1 − β)·θ + β·ema, once per optimizer step;
the EMA model is what `save_model` and the HF checkpoints write."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch import nn

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import build_config
from alignflow.tasks.trainers.ema import EMA


def openrlhf_moving_average(model: nn.Module, ema: dict[str, torch.Tensor], beta: float):
    for name, param in model.named_parameters():
        if param.requires_grad:
            ema[name] = (1 - beta) * param.data + beta * ema[name]


def _model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    model[1].bias.requires_grad_(False)  # frozen: never averaged
    return model


def test_two_steps_by_hand():
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema = EMA(model, beta=0.5)
    for value, expected in ((3.0, 2.0), (4.0, 3.0)):  # 0.5·3 + 0.5·1; 0.5·4 + 0.5·2
        with torch.no_grad():
            model.weight.fill_(value)
        ema.update(model)
        assert ema.params["weight"].item() == expected


def test_steps_follow_openrlhfs_moving_average():
    model = _model()
    ours = EMA(model, beta=0.9)
    ref = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    for _ in range(3):
        model(torch.randn(5, 3)).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()
        ours.update(model)
        openrlhf_moving_average(model, ref, 0.9)
    assert ours.params.keys() == ref.keys() and "1.bias" not in ours.params
    for name, tensor in ref.items():
        assert torch.equal(ours.params[name], tensor), name


def test_export_applies_the_average_and_gives_the_weights_back_bitwise():
    model = _model()
    ema = EMA(model, beta=0.0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ema.params["0.weight"] = ema.params["0.weight"] + 1.0
    with ema.applied(model):
        assert torch.equal(model[0].weight, before["0.weight"] + 1.0)
    after = dict(model.named_parameters())
    assert all(torch.equal(after[n], t) for n, t in before.items())


def test_checkpointed_bitwise_and_refused_when_missing(memory_store):
    model = _model()
    ema = EMA(model, beta=0.99)
    ema.params["0.bias"] += 0.123456789
    assert ema.save(memory_store, "ck") > 0
    other = EMA(_model(), beta=0.99)
    other.restore(memory_store, "ck")
    assert all(torch.equal(other.params[n], t) for n, t in ema.params.items())
    with pytest.raises(ConfigError, match="no ema.safetensors"):
        other.restore(memory_store, "elsewhere")


def test_the_flags_of_every_release_and_the_ranges():
    for flags in (["--enable_ema", "--ema_beta", "0.9"],
                  ["--train.enable_ema", "--train.ema_beta", "0.9"]):
        cfg = build_config("grpo", None, [], flags)
        assert (cfg.train.enable_ema, cfg.train.ema_beta) == (True, 0.9)
    with pytest.raises(ConfigError, match="ema_beta"):
        build_config("grpo", None, ["train.ema_beta=1.5"], [])
    with pytest.raises(ConfigError, match="train.enable_ema"):
        build_config("grpo", None, ["train.enable_ema=true", "ds.lora.rank=4"], [])


class _Trainer:
    """A trainer whose checkpoint of the live weights is still being written (held, as
    `saver.py` holds it) when the export starts."""

    def __init__(self, model: nn.Module) -> None:
        self.model, self.written, self.go = model, None, threading.Event()
        self._held = ThreadPoolExecutor(1).submit(self._write)
        self.global_step = 1

    def _write(self) -> None:
        self.go.wait(timeout=0.5)  # the write reads the weights late
        self.written = {n: p.detach().clone() for n, p in self.model.named_parameters()}

    def settle(self) -> None:
        self._held.result()

    def save_pretrained(self, folder: str, tokenizer=None) -> None:
        self.go.set()  # a write not done yet runs now, while the EMA is in the model
        self._held.result()


def test_the_export_waits_for_the_checkpoint_of_the_policys_weights(local_store):
    """An export swaps the EMA into the model: a checkpoint being written meanwhile must
    still hold the policy's weights, or a resumed run would train from the average."""
    from types import SimpleNamespace

    from alignflow.artifacts.scope import TaskScope, use_scope
    from alignflow.tasks.steps.export import export_model

    model = _model()
    ema = EMA(model, beta=0.0)
    ema.params["0.weight"] = ema.params["0.weight"] + 1.0
    policy = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = _Trainer(model)
    host = SimpleNamespace(trainer=trainer, ema=ema, tokenizer=None, policy_version=1)
    with use_scope(TaskScope(local_store, "r", "export", seed=1)):
        export_model(host)
    trainer.settle()
    assert all(torch.equal(trainer.written[n], t) for n, t in policy.items())
