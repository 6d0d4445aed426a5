"""LoRA on the tiny model: learns, resumes bitwise from an adapter-only checkpoint, the
reference is the base with the adapter off, merged weights export and sync exactly."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("peft")

from transformers import AutoModelForCausalLM

from alignflow.errors import ConfigError
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.modeling import lora
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.modeling.logprobs import sequence_logprobs
from alignflow.tasks.trainers import adapter_checkpoint
from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer
from tests.tolerance import network_bound

torch.set_num_threads(1)
CFG = lora.LoraConfig(rank=4, alpha=8)


def lm_loss(model, batch):
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {}


def _lora_model(lm_dir, cfg=CFG, seed=0):
    torch.manual_seed(seed)
    return lora.wrap(load_causal_lm(str(lm_dir)), cfg)


def _trainer(lm_dir, **kw):
    base = dict(lr=1e-2, lr_warmup_ratio=0.0, min_lr_ratio=1.0, total_steps=100)
    return TorchTrainer(_lora_model(lm_dir), TrainerConfig(**{**base, **kw}))


def _data(seed=0, n=4, length=12):
    return torch.randint(4, 512, (n, length), generator=torch.Generator().manual_seed(seed))


def _logp(model, ids):
    return sequence_logprobs(model, ids, torch.ones_like(ids), ids.shape[1] - 4)


def _train(trainer, steps, data):
    for _ in range(steps):
        trainer.step([{"input_ids": c} for c in data.split(2)], lm_loss)


def test_lora_learns_with_the_base_frozen(tiny_model_dir):
    """A 4-token cycle. The frozen tied embeddings and final norm bound the tiny model's
    logits to about ±1.3, so the adapters can lower the loss by about a nat, not more."""
    trainer = TorchTrainer(_lora_model(tiny_model_dir, lora.LoraConfig(rank=16, alpha=32)),
                           TrainerConfig(lr=3e-2, lr_warmup_ratio=0.0, min_lr_ratio=1.0,
                                         total_steps=30))
    data = torch.tensor([[10, 20, 30, 40] * 3] * 2)
    frozen = {k: v.clone() for k, v in trainer.model.state_dict().items() if "lora_" not in k}
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    losses = [trainer.step([{"input_ids": data}], lm_loss)["loss"] for _ in range(30)]
    assert losses[0] > 6.0 and losses[-1] < losses[0] - 0.8
    for name, p in trainer.model.state_dict().items():
        if name in frozen:
            assert torch.equal(p, frozen[name]), name


def test_adapter_checkpoint_resumes_bitwise(tiny_model_dir, memory_store):
    cfg = dict(lr=3e-3, lr_warmup_ratio=0.25, min_lr_ratio=0.1, total_steps=4, weight_decay=0.1)
    straight = _trainer(tiny_model_dir, **cfg)
    _train(straight, 4, _data())
    first = _trainer(tiny_model_dir, **cfg)
    _train(first, 2, _data())
    nbytes = adapter_checkpoint.save(first, memory_store, "ck", extra={"policy_version": 2})
    saved = memory_store.fs.open(f"{memory_store.root}/ck/model.safetensors").read()
    full = sum(p.numel() * 4 for p in first.model.parameters())
    assert nbytes < full / 2 and b"lora_A" in saved and b"embed_tokens" not in saved
    resumed = _trainer(tiny_model_dir, **cfg)
    assert adapter_checkpoint.restore(resumed, memory_store, "ck")["policy_version"] == 2
    _train(resumed, 2, _data())
    for (name, p), q in zip(straight.model.state_dict().items(),
                            resumed.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_reference_is_the_base_with_the_adapter_off(tiny_model_dir):
    trainer, ids = _trainer(tiny_model_dir), _data(1)
    _train(trainer, 2, _data())
    base = load_causal_lm(str(tiny_model_dir))
    with torch.no_grad():
        with lora.adapter_disabled(trainer.model) as ref:
            assert torch.equal(_logp(ref, ids), _logp(base, ids))
        assert not torch.allclose(_logp(trainer.model, ids), _logp(base, ids))


def test_merged_export_loads_plain_and_matches(tiny_model_dir, tmp_path):
    trainer, ids = _trainer(tiny_model_dir), _data(2)
    _train(trainer, 3, _data())
    lora.save_merged(trainer.model, str(tmp_path / "merged"))
    plain = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"), local_files_only=True)
    assert not hasattr(plain, "peft_config")
    engine = HFEngine.from_pretrained(str(tiny_model_dir))
    engine.update_weights(lora.merged_state(trainer.model), version=1)
    with torch.no_grad():
        expected = _logp(trainer.model, ids)
        tol = network_bound(plain.config, plain(ids).logits.abs().max())  # tests/tolerance.py
        torch.testing.assert_close(_logp(plain, ids), expected, atol=tol, rtol=0)
        torch.testing.assert_close(_logp(engine.model, ids), expected, atol=tol, rtol=0)


def test_errors_are_one_line(tiny_model_dir, memory_store):
    with pytest.raises(ConfigError, match="lora_rank=0: expected an integer >= 1"):
        lora.wrap(load_causal_lm(str(tiny_model_dir)), lora.LoraConfig(rank=0))
    with pytest.raises(ConfigError, match=r"load_in_4bit=True needs a CUDA GPU"):
        lora.load_base(str(tiny_model_dir), load_in_4bit=True)
    with pytest.raises(ConfigError, match="target_modules=\\['nope'\\]"):
        lora.wrap(load_causal_lm(str(tiny_model_dir)),
                  lora.LoraConfig(rank=8, target_modules=["nope"]))
    other = _trainer(tiny_model_dir)
    adapter_checkpoint.save(other, memory_store, "ck")
    bigger = TorchTrainer(_lora_model(tiny_model_dir, lora.LoraConfig(rank=8)),
                          TrainerConfig())
    with pytest.raises(ConfigError, match="adapter checkpoint does not fit this model"):
        adapter_checkpoint.restore(bigger, memory_store, "ck")


def test_deepspeed_zero3_lora_trains_and_merges_from_gathered_shards(tiny_model_dir):
    """DeepSpeed steps only the adapters; merged weights come from the gathered state."""
    pytest.importorskip("deepspeed")
    from alignflow.tasks.trainers.deepspeed.section import DSConfig
    from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer

    trainer = DeepSpeedTrainer(_lora_model(tiny_model_dir),
                               TrainerConfig(lr=1e-3, lr_warmup_ratio=0.0, total_steps=3),
                               DSConfig(zero_stage=3), overrides={
                                   "zero_optimization": {"stage3_param_persistence_threshold": 0}})
    reference = _trainer(tiny_model_dir, lr=1e-3, min_lr_ratio=0.1, total_steps=3)
    for step in range(3):
        trainer.step([{"input_ids": c} for c in _data(step).split(2)], lm_loss)
        _train(reference, 1, _data(step))
    merged = dict(trainer.state_dict_for_sync())  # gathered and merged
    expected = dict(reference.state_dict_for_sync())
    assert set(merged) == set(expected) and not any("lora_" in k for k in merged)
    base = load_causal_lm(str(tiny_model_dir)).state_dict()
    assert (merged["model.layers.0.mlp.gate_proj.weight"] - base["model.layers.0.mlp.gate_proj.weight"]
            ).abs().max() > 1e-4  # the adapters moved the merged weights (20x the tolerance)
    for name, p in expected.items():
        # ZeRO-3 sums gradients on flat buffers; Adam turns that float noise into ~lr·1e-3
        torch.testing.assert_close(merged[name], p, atol=5e-6, rtol=0, msg=name)


def test_deepspeed_lora_checkpoint_holds_the_adapter_and_resumes_bitwise(tiny_model_dir,
                                                                        memory_store):
    """Phase 1 left full weights in a DeepSpeed LoRA checkpoint: only adapters now."""
    pytest.importorskip("deepspeed")
    from alignflow.tasks.trainers.build import build_trainer
    from alignflow.tasks.trainers.deepspeed.section import DSConfig

    ds = DSConfig(zero_stage=2)
    cfg = TrainerConfig(lr=3e-3, lr_warmup_ratio=0.25, min_lr_ratio=0.1, total_steps=4)

    def trainer():
        return build_trainer(_lora_model(tiny_model_dir), cfg, ds)

    straight, first = trainer(), trainer()
    for step in range(4):
        straight.step([{"input_ids": c} for c in _data(step).split(2)], lm_loss)
    for step in range(2):
        first.step([{"input_ids": c} for c in _data(step).split(2)], lm_loss)
    first.save(memory_store, "ck")
    saved = memory_store.fs.open(f"{memory_store.root}/ck/model.safetensors").read()
    assert b"lora_A" in saved and b"embed_tokens" not in saved
    resumed = trainer()
    resumed.restore(memory_store, "ck")
    for step in range(2, 4):
        resumed.step([{"input_ids": c} for c in _data(step).split(2)], lm_loss)
    for (name, p), (_, q) in zip(straight.state_dict_for_sync(), resumed.state_dict_for_sync(),
                                 strict=True):
        assert torch.equal(p, q), name


def test_a_checkpoint_from_another_backend_or_lora_setting_is_refused(tiny_model_dir,
                                                                       memory_store):
    """Resuming with another trainer or LoRA setting stops in one line, not with fresh AdamW
    moments or a strict-load traceback."""
    from alignflow.artifacts import checkpoints

    plain = TorchTrainer(load_causal_lm(str(tiny_model_dir)), TrainerConfig())
    adapted = _trainer(tiny_model_dir)
    adapted.save(memory_store, "adapter")
    plain.save(memory_store, "full")
    checkpoints.save(memory_store, "ds", dict(plain.model.state_dict()),
                     extra={"trainer": "deepspeed", "world_size": 2, "zero_stage": 3})
    with pytest.raises(ConfigError, match="adapter: holds LoRA adapters only"):
        plain.restore(memory_store, "adapter")
    with pytest.raises(ConfigError, match="full: not an adapter checkpoint"):
        adapted.restore(memory_store, "full")
    for trainer in (plain, adapted):
        with pytest.raises(ConfigError, match="ds: written by the 'deepspeed' trainer"):
            trainer.restore(memory_store, "ds")


def test_bf16_adapters_checkpoint_their_fp32_masters_and_resume_bitwise(tiny_model_dir,
                                                                        memory_store):
    """param_dtype bf16 with LoRA (issue 21 §3.10): the base and adapters compute in bf16,
    the adapters' fp32 masters are what AdamW steps and what the checkpoint holds."""
    straight, first = (_trainer(tiny_model_dir, dtype="bf16") for _ in range(2))
    _train(straight, 3, _data())
    _train(first, 2, _data())
    first.save(memory_store, "ck")
    saved = lora.adapter_state(first.model)
    assert {p.dtype for p in first.model.parameters()} == {torch.bfloat16}
    resumed = _trainer(tiny_model_dir, dtype="bf16")
    resumed.restore(memory_store, "ck")
    _train(resumed, 1, _data())
    for a, b in zip(straight.masters.params, resumed.masters.params, strict=True):
        assert a.dtype == torch.float32 and torch.equal(a, b)
    assert all(t.dtype == torch.bfloat16 for t in saved.values())  # the module: bf16
