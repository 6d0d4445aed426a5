"""DeepSpeedTrainer in one process (a world of one, gloo): the TorchTrainer's semantics at
ZeRO 0-3, bitwise resume, layout errors, sync/export, CPUAdam offload, bf16, checkpointing."""

import math

import pytest
import torch

pytest.importorskip("deepspeed")

from alignflow.errors import ConfigError
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.trainers.base import Trainer, TrainerConfig
from alignflow.tasks.trainers.deepspeed import checkpoint as ds_checkpoint
from alignflow.tasks.trainers.deepspeed.config import ds_config
from alignflow.tasks.trainers.deepspeed.section import DSConfig
from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer
from alignflow.tasks.trainers.torch_trainer import TorchTrainer

torch.set_num_threads(1)
STAGES = [0, 1, 2, 3]
# the tiny model's tensors are all below ZeRO-3's default persistence threshold (1e5)
SHARD_ALL = {"zero_optimization": {"stage3_param_persistence_threshold": 0}}
RESUME_CFG = dict(lr=3e-3, lr_warmup_ratio=0.25, min_lr_ratio=0.1, total_steps=4, weight_decay=0.1)


def lm_loss(model, batch):
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {"tokens": float(batch["input_ids"].numel())}


def _cfg(**kw):
    base = dict(lr=1e-2, lr_warmup_ratio=0.0, min_lr_ratio=1.0, total_steps=100, max_norm=1.0)
    return TrainerConfig(**{**base, **kw})


def _ds(lm_dir, stage=2, ds=None, **cfg):
    return DeepSpeedTrainer(load_causal_lm(str(lm_dir)), _cfg(**cfg),
                            ds or DSConfig(zero_stage=stage), overrides=SHARD_ALL)


def _batches(seed, n=4, length=10, size=2):
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": c} for c in torch.randint(4, 512, (n, length), generator=g).split(size)]


def _weights(trainer):
    return dict(trainer.state_dict_for_sync())


def test_satisfies_protocol(tiny_model_dir):
    assert isinstance(_ds(tiny_model_dir), Trainer)


@pytest.mark.parametrize("stage", STAGES)
def test_steps_match_torch_trainer(tiny_model_dir, stage):
    """3 steps of 2 accumulated micro-batches, warmup-cosine LR: same loss, norm, LR, weights.

    (Weights to 2e-5: ZeRO steps AdamW on flat fp32 buffers, whose sums round differently.)
    """
    sched = dict(lr=1e-3, lr_warmup_ratio=0.34, min_lr_ratio=0.1, total_steps=3, weight_decay=0.1)
    ds, ref = _ds(tiny_model_dir, stage, **sched), TorchTrainer(
        load_causal_lm(str(tiny_model_dir)), _cfg(**sched))
    for step in range(3):
        md, mr = ds.step(_batches(step), lm_loss), ref.step(_batches(step), lm_loss)
        assert md["loss"] == pytest.approx(mr["loss"], abs=1e-6)
        assert md["grad_norm"] == pytest.approx(mr["grad_norm"], rel=1e-5)
        assert (md["lr"], md["step"], md["tokens"]) == (mr["lr"], mr["step"], 20.0)
    for name, p in ref.model.state_dict().items():
        torch.testing.assert_close(_weights(ds)[name], p, atol=2e-5, rtol=0, msg=name)


@pytest.mark.parametrize(("max_norm", "stage"), [(0.05, 0), (0.05, 2), (0.0, 0), (0.0, 3)])
def test_clipping_reports_the_norm_before_clipping(tiny_model_dir, max_norm, stage):
    ds = _ds(tiny_model_dir, stage, max_norm=max_norm, lr=1e-3)
    ref = TorchTrainer(load_causal_lm(str(tiny_model_dir)), _cfg(max_norm=max_norm, lr=1e-3))
    md, mr = ds.step(_batches(0), lm_loss), ref.step(_batches(0), lm_loss)
    assert md["grad_norm"] == pytest.approx(mr["grad_norm"], rel=1e-5) and md["grad_norm"] > 1.0
    ds.step(_batches(1), lm_loss), ref.step(_batches(1), lm_loss)
    for name, p in ref.model.state_dict().items():  # the second step shows clipped moments
        torch.testing.assert_close(_weights(ds)[name], p, atol=2e-5, rtol=0, msg=name)


@pytest.mark.parametrize("stage", STAGES)
def test_save_restore_continues_bitwise(tiny_model_dir, memory_store, stage):
    def run(trainer, steps):
        for _ in range(steps):
            trainer.step([{"input_ids": c} for c in torch.randint(4, 512, (4, 10)).split(2)],
                         lm_loss)

    torch.manual_seed(5)
    straight = _ds(tiny_model_dir, stage, **RESUME_CFG)
    run(straight, 4)
    torch.manual_seed(5)
    first = _ds(tiny_model_dir, stage, **RESUME_CFG)
    run(first, 2)
    nbytes = first.save(memory_store, "runs/r/checkpoints/actor-2", extra={"policy_version": 2})
    torch.manual_seed(123)  # a fresh process would have other RNG state
    resumed = _ds(tiny_model_dir, stage, **RESUME_CFG)
    extra = resumed.restore(memory_store, "runs/r/checkpoints/actor-2")
    assert (extra["policy_version"], extra["zero_stage"], resumed.global_step) == (2, stage, 2)
    assert nbytes > 3 * sum(p.numel() for p in first.model.parameters())  # weights + shards
    run(resumed, 2)
    assert resumed.lr == straight.lr
    for (name, p), q in zip(_weights(straight).items(), _weights(resumed).values(), strict=True):
        assert torch.equal(p, q), name


def test_other_stage_needs_weights_only_restore(tiny_model_dir, memory_store):
    trainer = _ds(tiny_model_dir, 2)
    for step in range(3):
        trainer.step(_batches(step), lm_loss)
    trainer.save(memory_store, "ck")
    other = _ds(tiny_model_dir, 3)
    with pytest.raises(ConfigError, match=r"ck: saved with zero_stage=2, this trainer has "
                                          r"zero_stage=3.*optimizer=False"):
        other.restore(memory_store, "ck")
    other.restore(memory_store, "ck", optimizer=False)
    assert other.global_step == 3 and other.lr == trainer.lr
    for (name, p), q in zip(_weights(trainer).items(), _weights(other).values(), strict=True):
        assert torch.equal(p, q), name
    other.step(_batches(1), lm_loss)  # the masters were re-cut: the step starts from the
    for name, p in _weights(trainer).items():  # loaded weights, not the initial ones
        assert (_weights(other)[name] - p).abs().max() <= 1.01 * trainer.cfg.lr, name


def test_torch_checkpoint_loads_weights_only(tiny_model_dir, memory_store):
    torch_trainer = TorchTrainer(load_causal_lm(str(tiny_model_dir)), _cfg())
    torch_trainer.step(_batches(0), lm_loss)
    torch_trainer.save(memory_store, "ck")
    trainer = _ds(tiny_model_dir, 2)
    with pytest.raises(ConfigError, match="'torch' trainer.*optimizer=False"):
        trainer.restore(memory_store, "ck")
    trainer.restore(memory_store, "ck", optimizer=False)
    for name, p in torch_trainer.model.state_dict().items():
        assert torch.equal(_weights(trainer)[name], p), name


def test_zero3_sync_to_engine_and_save_pretrained(tiny_model_dir, tmp_path):
    trainer = _ds(tiny_model_dir, 3)
    trainer.step(_batches(0), lm_loss)
    assert trainer.model.model.embed_tokens.weight.numel() == 0  # a shard, not the weights
    engine = HFEngine.from_pretrained(str(tiny_model_dir))
    engine.update_weights(trainer.state_dict_for_sync(), version=1)
    trainer.save_pretrained(str(tmp_path / "final"), engine.tokenizer)
    reloaded = load_causal_lm(str(tmp_path / "final"))
    weights = _weights(trainer)
    assert weights["model.embed_tokens.weight"].shape == (512, 64)
    for name, p in weights.items():
        assert torch.equal(engine.model.state_dict()[name], p), name
        assert torch.equal(reloaded.state_dict()[name], p), name
    assert (tmp_path / "final" / "tokenizer.json").exists()


def test_adam_offload_matches_adamw(tiny_model_dir, memory_store):
    """DeepSpeedCPUAdam (compiled on first use) steps like torch AdamW, and resumes bitwise."""
    offload = DSConfig(zero_stage=3, adam_offload=True)
    sched = dict(lr=1e-3, weight_decay=0.1)
    a, b = _ds(tiny_model_dir, ds=offload, **sched), _ds(tiny_model_dir, 3, **sched)
    for step in range(2):
        a.step(_batches(step), lm_loss), b.step(_batches(step), lm_loss)
    for name, p in _weights(b).items():
        torch.testing.assert_close(_weights(a)[name], p, atol=1e-5, rtol=0, msg=name)
    a.save(memory_store, "ck")
    resumed = _ds(tiny_model_dir, ds=offload, **sched)
    resumed.restore(memory_store, "ck")
    a.step(_batches(2), lm_loss), resumed.step(_batches(2), lm_loss)
    for (name, p), q in zip(_weights(a).items(), _weights(resumed).values(), strict=True):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("stage", [2, 3])
def test_bf16_is_deepspeeds_bf16_mode_with_fp32_masters(tiny_model_dir, memory_store, stage):
    """param_dtype bf16 (issue 21 §3.10): a bf16 module (ZeRO moves bf16), fp32 master
    partitions in the optimizer, bf16 weights synced; checkpoints resume bitwise."""
    trainer = _ds(tiny_model_dir, stage, dtype="bf16")
    assert trainer.engine.bfloat16_enabled()
    before = _weights(trainer)["model.embed_tokens.weight"].clone()
    metrics = trainer.step(_batches(0), lm_loss)
    assert math.isfinite(metrics["loss"]) and 5.5 < metrics["loss"] < 7.0
    after = _weights(trainer)["model.embed_tokens.weight"]
    assert after.dtype == torch.bfloat16 and not torch.equal(before, after)
    assert {m.dtype for m in ds_checkpoint._masters(trainer.engine)} == {torch.float32}
    trainer.save(memory_store, "ck")
    resumed = _ds(tiny_model_dir, stage, dtype="bf16")
    resumed.restore(memory_store, "ck")
    trainer.step(_batches(1), lm_loss), resumed.step(_batches(1), lm_loss)
    for (name, p), q in zip(_weights(trainer).items(), _weights(resumed).values(), strict=True):
        assert torch.equal(p, q), name


def test_gradient_checkpointing_gives_same_step(tiny_model_dir):
    a, b = _ds(tiny_model_dir, 3), _ds(tiny_model_dir, 3, gradient_checkpointing=True)
    assert b.model.is_activation_checkpointing and not a.model.is_activation_checkpointing
    ma, mb = a.step(_batches(0), lm_loss), b.step(_batches(0), lm_loss)
    assert ma["loss"] == pytest.approx(mb["loss"], abs=1e-6)
    for (name, p), q in zip(_weights(a).items(), _weights(b).values(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0, msg=name)


def test_config_errors_name_the_field(tiny_model_dir):
    # the `ds` section holds DeepSpeed's keys (declared and checked there once)
    with pytest.raises(ConfigError, match="'zero_stage': expected 0, 1, 2, 3 or null, got 4"):
        DSConfig(zero_stage=4)
    with pytest.raises(ConfigError, match="'adam_offload': expected false with zero_stage=0"):
        DSConfig(zero_stage=0, adam_offload=True)
    with pytest.raises(ConfigError, match=r"overrides\['optimizer'\]: set by the trainer"):
        ds_config(_cfg(), DSConfig(zero_stage=2), pin_memory=False,
                  overrides={"optimizer": {"type": "Adam"}})
    with pytest.raises(ConfigError, match="2 weights for 1 micro-batches"):
        _ds(tiny_model_dir).step(_batches(0, n=2), lm_loss, weights=[0.5, 0.5])
