"""Muon (`optim: muon`): which tensors Muon steps, and one step of the torch trainer and of
DeepSpeed's Muon against a hand-written Muon + AdamW step on the tiny model."""

import math

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.muon import MuonAdamW, split
from alignflow.tasks.trainers.torch_trainer import TorchTrainer

CFG = dict(lr=1e-3, muon_lr=0.02, weight_decay=0.1, lr_warmup_ratio=0.0, min_lr_ratio=1.0,
           total_steps=10, max_norm=0.0, optim="muon")


def lm_loss(model, batch):
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {}


def _batch():
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(4, 500, (2, 10), generator=g)}


def test_split_hidden_matrices_only(tiny_model_dir):
    model = load_causal_lm(str(tiny_model_dir))
    named = dict(model.named_parameters())
    muon, heads, flat = split(named.items())
    muon_names = {n for n, p in named.items() if any(p is q for q in muon)}
    assert muon_names and all(named[n].ndim == 2 for n in muon_names)
    assert not any("embed" in n or "lm_head" in n or "norm" in n for n in muon_names)
    assert {n for n in named if "proj" in n} == muon_names  # every attention/MLP matrix
    assert all(p.ndim == 2 for p in heads) and all(p.ndim == 1 for p in flat)
    assert len(muon) + len(heads) + len(flat) == len(named)


def _newton_schulz(g, steps=5, fused=True):
    """Keller Jordan's quintic iteration X ← aX + (bS + cS²)X, S = XXᵀ, from X = G/‖G‖_F,
    in bf16 with fused multiply-adds (`addmm`) as torch's Muon runs it (`fused=False`: as
    DeepSpeed's, op by op; bf16 rounding makes the two differ by more than the tolerance)."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.bfloat16()
    tall = x.shape[0] > x.shape[1]
    x = x.T if tall else x
    x = x / x.norm().clamp(min=1e-7)
    for _ in range(steps):
        s = x @ x.T
        if fused:
            x = torch.addmm(x, torch.addmm(s, s, s, beta=b, alpha=c), x, beta=a)
        else:
            x = a * x + (b * s + c * s @ s) @ x
    return (x.T if tall else x).float()


def _hand_step(model, lr, muon_lr, wd, eps=1e-8, momentum=0.95, fused=True):
    """One step from zero state: Muon on the hidden matrices (EMA momentum, Nesterov,
    NS5, lr·√max(1, rows/cols)), AdamW's first step (m̂/√v̂ = g/|g|) on the rest."""
    out = {}
    for name, p in model.named_parameters():
        g = p.grad
        if p.ndim == 2 and "embed" not in name and "lm_head" not in name:
            buf = torch.zeros_like(g).lerp_(g, 1 - momentum)  # μ·0 + (1 − μ)·g
            # Nesterov: g + μ(buf − g), with lerp's rounding: bf16 NS magnifies any other
            update = _newton_schulz(g.lerp(buf, momentum), fused=fused)
            scale = math.sqrt(max(1.0, p.shape[0] / p.shape[1]))
            out[name] = p * (1 - muon_lr * wd) - muon_lr * scale * update
        else:
            decay = wd if p.ndim >= 2 else 0.0
            out[name] = p * (1 - lr * decay) - lr * g / (g.abs() + eps)
    return out


def test_torch_trainer_muon_step_matches_hand_step(tiny_model_dir):
    trainer = TorchTrainer(load_causal_lm(str(tiny_model_dir)), TrainerConfig(**CFG))
    assert isinstance(trainer.optimizer, MuonAdamW)
    model = load_causal_lm(str(tiny_model_dir))
    lm_loss(model, _batch())[0].backward()
    with torch.no_grad():
        expected = _hand_step(model, CFG["lr"], CFG["muon_lr"], CFG["weight_decay"])
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.step([_batch()], lm_loss)
    moved = 0
    for name, p in trainer.model.named_parameters():
        # bf16 Newton-Schulz: entries differ by a few bf16 ulps (2^-8 relative) of |O| <= ~1.5
        tol = CFG["muon_lr"] * 2 * 1.5 * 2 ** -7 if "proj" in name else 1e-6
        assert torch.allclose(p, expected[name], atol=tol, rtol=0), name
        moved += int(not torch.equal(p, before[name]))
    assert moved == len(before)


def test_schedule_scales_both_groups_and_checkpoint_round_trips(tiny_model_dir):
    cfg = TrainerConfig(**{**CFG, "lr_warmup_ratio": 0.5, "total_steps": 4})
    trainer = TorchTrainer(load_causal_lm(str(tiny_model_dir)), cfg)
    assert {g["lr"] for g in trainer.optimizer.param_groups} == {0.0}  # warmup step 0 of 2
    trainer.step([_batch()], lm_loss)
    lrs = {g["lr"] for g in trainer.optimizer.param_groups}
    assert lrs == {cfg.lr / 2, cfg.muon_lr / 2}  # warmup step 1 of 2 scales both
    state = trainer.optimizer.state_dict()
    other = TorchTrainer(load_causal_lm(str(tiny_model_dir)), cfg)
    other.optimizer.load_state_dict(state)
    assert other.optimizer.muon.state_dict()["state"][0]["momentum_buffer"].abs().sum() > 0


def test_bad_optim_named():
    with pytest.raises(ConfigError, match="optim"):
        TrainerConfig(optim="lion")


def test_deepspeed_muon_step_matches_hand_step(tiny_model_dir, monkeypatch):
    pytest.importorskip("deepspeed")
    from alignflow.tasks.trainers.deepspeed.section import DSConfig
    from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer

    monkeypatch.setattr(torch._dynamo.config, "disable", True)  # NS eager: no CPU compile
    trainer = DeepSpeedTrainer(load_causal_lm(str(tiny_model_dir)), TrainerConfig(**CFG),
                               DSConfig(zero_stage=2))
    model = load_causal_lm(str(tiny_model_dir))
    lm_loss(model, _batch())[0].backward()
    with torch.no_grad():
        expected = _hand_step(model, CFG["lr"], CFG["muon_lr"], CFG["weight_decay"],
                              fused=False)
    trainer.step([_batch()], lm_loss)
    weights = dict(trainer.state_dict_for_sync())
    for name, want in expected.items():
        # DeepSpeed's momentum is heavy-ball (buf = μ·buf + g) and its NS normalises once
        # more; after one step both give the NS of the same direction, so the bf16 bound holds
        tol = CFG["muon_lr"] * 2 * 1.5 * 2 ** -7 if "proj" in name else 1e-6
        assert torch.allclose(weights[name], want, atol=tol, rtol=0), name
