"""TorchTrainer: overfit, accumulation == big batch, LR by hand, clipping, exact resume, bf16."""

import math

import pytest
import torch
from torch import nn

from alignflow.errors import ConfigError
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.trainers.base import Trainer, TrainerConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer
from tests.tolerance import gradient_bound, network_bound

torch.set_num_threads(1)


def lm_loss(model, batch):
    """Mean next-token cross-entropy; all rows have the same length, so means compose."""
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {"tokens": float(batch["input_ids"].numel())}


def _data(n=8, length=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, 512, (n, length), generator=g)


def _trainer(lm_dir, **cfg):
    base = dict(lr=1e-2, lr_warmup_ratio=0.0, min_lr_ratio=1.0, total_steps=100, max_norm=1.0)
    return TorchTrainer(load_causal_lm(str(lm_dir)), TrainerConfig(**{**base, **cfg}))


def _chunks(x, size):
    return [{"input_ids": c} for c in x.split(size)]


def test_satisfies_protocol(tiny_model_dir):
    assert isinstance(_trainer(tiny_model_dir), Trainer)


def test_loss_decreases_on_overfit(tiny_model_dir):
    trainer, data = _trainer(tiny_model_dir), _data(4)
    losses = [trainer.step(_chunks(data, 4), lm_loss)["loss"] for _ in range(15)]
    assert losses[0] > 6.0  # ~ln(512) = 6.24 for the random tiny model
    assert losses[-1] < 0.6 * losses[0]
    assert trainer.global_step == 15


def test_accumulation_4x2_equals_1x8(tiny_model_dir):
    """Compared on the accumulated gradient: AdamW's first moment after one step is 0.1·g.

    (Weights are not compared: Adam's first update is ~lr·sign(g), which turns 1e-9 float
    noise in near-zero gradients into lr-sized differences.)
    """
    data = _data(8)
    a, b = _trainer(tiny_model_dir, max_norm=0.0), _trainer(tiny_model_dir, max_norm=0.0)
    ma = a.step(_chunks(data, 2), lm_loss)
    mb = b.step(_chunks(data, 8), lm_loss)
    config = a.model.config  # bounds: tests/tolerance.py
    assert ma["loss"] == pytest.approx(mb["loss"], abs=network_bound(config, ma["loss"]))
    assert ma["grad_norm"] == pytest.approx(mb["grad_norm"], rel=1e-6)
    assert ma["tokens"] == pytest.approx(24.0)  # weighted mean of 4 x 24-token micro-batches
    for (name, pa), pb in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
        ga, gb = (t.optimizer.state[p]["exp_avg"] / 0.1 for t, p in ((a, pa), (b, pb)))
        assert ga.abs().max() > 0, name
        torch.testing.assert_close(ga, gb, atol=gradient_bound(config, 8 * 24, ga), rtol=0,
                                   msg=name)


def _linear_trainer(**cfg):
    model = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.0, 1.0]]))
    return TorchTrainer(model, TrainerConfig(**cfg))


def _dot_loss(model, batch):
    return model(batch["x"]).sum(), {}


def test_warmup_cosine_lr_by_hand():
    trainer = _linear_trainer(lr=1e-3, lr_warmup_ratio=0.2, min_lr_ratio=0.1, total_steps=10)
    lrs = [trainer.step([{"x": torch.ones(1, 2)}], _dot_loss)["lr"] for _ in range(10)]
    cos = lambda p: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p))  # noqa: E731
    # OpenRLHF's cosine_with_min_lr: the warmup starts at 0, the cosine at the peak
    expected = [0.0, 5e-4] + [1e-3 * cos((s - 2) / 8) for s in range(2, 10)]
    assert lrs == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert lrs[2] == 1e-3 and lrs[-1] == pytest.approx(1.342542e-4, rel=1e-6)


@pytest.mark.parametrize(("max_norm", "grad"), [(1.0, [0.6, 0.8]), (0.0, [3.0, 4.0])])
def test_clip_grad_norm(max_norm, grad):
    """grad of w·x at x=(3,4) has norm 5; AdamW's first moment shows the clipped grad."""
    trainer = _linear_trainer(lr=1e-3, lr_warmup_ratio=0.0, max_norm=max_norm, betas=(0.9, 0.999))
    metrics = trainer.step([{"x": torch.tensor([[3.0, 4.0]])}], _dot_loss)
    assert metrics["grad_norm"] == pytest.approx(5.0)
    exp_avg = trainer.optimizer.state[trainer.model.weight]["exp_avg"]
    torch.testing.assert_close(exp_avg, 0.1 * torch.tensor([grad]), atol=1e-7, rtol=0)


def test_save_restore_continues_bitwise(tiny_model_dir, memory_store):
    """Batches come from the global RNG, so RNG state must come back too."""
    cfg = dict(lr=3e-3, lr_warmup_ratio=0.25, min_lr_ratio=0.1, total_steps=4, weight_decay=0.1)

    def run(trainer, steps):
        for _ in range(steps):
            trainer.step(_chunks(torch.randint(4, 512, (4, 10)), 2), lm_loss)

    torch.manual_seed(5)
    straight = _trainer(tiny_model_dir, **cfg)
    run(straight, 4)
    torch.manual_seed(5)
    first = _trainer(tiny_model_dir, **cfg)
    run(first, 2)
    first.save(memory_store, "runs/r/checkpoints/policy-000002", extra={"policy_version": 2})
    torch.manual_seed(123)  # a fresh process would have other RNG state
    resumed = _trainer(tiny_model_dir, **cfg)
    extra = resumed.restore(memory_store, "runs/r/checkpoints/policy-000002")
    assert extra["policy_version"] == 2 and resumed.global_step == 2
    run(resumed, 2)
    assert resumed.lr == straight.lr
    for (name, p), q in zip(straight.model.state_dict().items(),
                            resumed.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_bf16_holds_bf16_parameters_and_steps_fp32_masters(tiny_model_dir):
    """param_dtype bf16 (issue 21 §3.10): the module in bf16, AdamW on fp32 masters."""
    trainer = _trainer(tiny_model_dir, dtype="bf16")
    embed = trainer.model.model.embed_tokens.weight
    before = trainer.masters.params[0].detach().clone()
    metrics = trainer.step(_chunks(_data(4), 2), lm_loss)
    assert math.isfinite(metrics["loss"]) and 5.5 < metrics["loss"] < 7.0
    assert {p.dtype for p in trainer.model.parameters()} == {torch.bfloat16}
    stepped = {p.dtype for g in trainer.optimizer.param_groups for p in g["params"]}
    assert stepped == {torch.float32} and not torch.equal(before, trainer.masters.params[0])
    assert torch.equal(embed, trainer.masters.params[0].to(torch.bfloat16))
    synced = dict(trainer.state_dict_for_sync())
    assert {t.dtype for t in synced.values()} == {torch.bfloat16}  # what a bf16 engine gets
    assert sum(t.nbytes for t in synced.values()) == sum(
        t.nbytes for _, t in _trainer(tiny_model_dir).state_dict_for_sync()) // 2


def test_bf16_checkpoints_hold_the_fp32_masters_and_resume_bitwise(tiny_model_dir,
                                                                   memory_store):
    straight, stopped = (_trainer(tiny_model_dir, dtype="bf16") for _ in range(2))
    for t in (straight, stopped):
        t.step(_chunks(_data(4), 2), lm_loss)
    stopped.save(memory_store, "ck")
    saved = memory_store.read_bytes("ck/model.safetensors")
    resumed = _trainer(tiny_model_dir, dtype="bf16")
    resumed.restore(memory_store, "ck")
    for t in (straight, resumed):
        t.step(_chunks(_data(4, seed=1), 2), lm_loss)
    for a, b in zip(straight.masters.params, resumed.masters.params, strict=True):
        assert a.dtype == torch.float32 and torch.equal(a, b)
    for a, b in zip(straight.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)
    from safetensors.torch import load as load_tensors

    assert {t.dtype for t in load_tensors(saved).values()} == {torch.float32}


def test_gradient_checkpointing_gives_same_step(tiny_model_dir):
    a = _trainer(tiny_model_dir)
    b = _trainer(tiny_model_dir, gradient_checkpointing=True)
    assert b.model.is_activation_checkpointing and not a.model.is_activation_checkpointing
    ma, mb = (t.step(_chunks(_data(4), 2), lm_loss) for t in (a, b))
    assert ma["loss"] == pytest.approx(mb["loss"], abs=1e-6)
    for pa, pb in zip(a.model.parameters(), b.model.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=0)


def test_sync_to_engine_and_save_pretrained(tiny_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir)
    trainer.step(_chunks(_data(4), 4), lm_loss)
    engine = HFEngine.from_pretrained(str(tiny_model_dir))
    engine.update_weights(trainer.state_dict_for_sync(), version=1)
    trainer.save_pretrained(str(tmp_path / "final"), engine.tokenizer)
    reloaded = load_causal_lm(str(tmp_path / "final"))
    for name, p in trainer.model.state_dict().items():
        assert torch.equal(engine.model.state_dict()[name], p), name
        assert torch.equal(reloaded.state_dict()[name], p), name
    assert (tmp_path / "final" / "tokenizer.json").exists()


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="train_batch_size=10: expected a multiple of micro"):
        TrainerConfig(train_batch_size=10, micro_train_batch_size=4)
    with pytest.raises(ConfigError, match="dtype='fp16'"):
        TrainerConfig(dtype="fp16")
    assert TrainerConfig(train_batch_size=8, micro_train_batch_size=2).accumulation_steps == 4
