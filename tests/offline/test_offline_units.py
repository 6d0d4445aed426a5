"""Fast checks of the offline pieces: the sample order, configs and flags, preparation
(pretrain mode, truncation, CSFT, PRM labels) and micro-batch accumulation."""

from __future__ import annotations

import json
import math

import pytest
import torch

from alignflow.artifacts.scope import TaskScope, use_scope
from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.offline.config import DistillConfig, DPOConfig, OfflineTrainConfig, SFTConfig
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.offline.batches import load_examples
from alignflow.tasks.offline.config import EvalConfig, OfflineDataConfig, PrepareSpec, TrainSpec
from alignflow.tasks.offline.kinds import objective
from alignflow.tasks.offline.loss_config import DPOModelConfig, KTOModelConfig
from alignflow.tasks.offline.objectives import Context, dpo, kto, sft, step_denominator
from alignflow.tasks.offline.prepare import prepare
from alignflow.tasks.offline.reference import _split_logps
from alignflow.tasks.trainers.plan import Plan
from tests.tolerance import network_bound


def test_order_is_a_function_of_seed_epoch_and_step():
    plan = Plan(order_seed=7, train_rows=20, steps_per_epoch=5, total_steps=10, save_steps=3)
    assert plan.chunks == 4 and list(plan.chunk_steps(3)) == [9]
    epoch0 = [i for s in range(5) for i in plan.indices(s, 4)]
    epoch1 = [i for s in range(5, 10) for i in plan.indices(s, 4)]
    assert sorted(epoch0) == sorted(epoch1) == list(range(20)) and epoch0 != epoch1
    assert plan.indices(6, 4) == plan.indices(6, 4)
    other = Plan(8, 20, 5, 10, 3)
    assert other.indices(0, 4) != plan.indices(0, 4)


def _data(**kw) -> OfflineDataConfig:
    """The synthetic rows' columns in the chat template (OpenRLHF's defaults name none)."""
    return OfflineDataConfig(**{"output_key": "output", "prompt_key": "prompt",
                                "apply_chat_template": True, **kw})


def test_openrlhf_flags_map_onto_the_config():
    cfg = load_config(DPOConfig, flags=["--pretrain", "m", "--beta", "0.2", "--ipo",
                                        "--train_batch_size", "16", "--save_steps", "5"])
    assert (cfg.model.model_name_or_path, cfg.model.beta, cfg.model.dpo_variant) == ("m", 0.2, "ipo")
    assert cfg.train.batch_size == 16 and cfg.ckpt.save_steps == 5
    cdpo = load_config(DPOConfig, flags=["--label_smoothing", "0.1"])
    assert cdpo.model.dpo_variant == "cdpo"
    plan = SFTConfig(train=OfflineTrainConfig(batch_size=8, max_epochs=1)).plan(0, 100)
    assert (plan.steps_per_epoch, plan.total_steps) == (12, 12) and plan.save_steps == 12
    with pytest.raises(ConfigError, match="teacher.model_name_or_path"):
        DistillConfig()
    with pytest.raises(ConfigError, match="save_steps"):
        load_config(SFTConfig, sets=["ckpt.save_steps=0"])


def _prepare(store, cfg: OfflineDataConfig, kind: str, tiny: str, **spec):
    with use_scope(TaskScope(store, "r", "prepare", seed=1)):
        data = prepare(PrepareSpec(data=cfg, **spec), kind, tiny)
    return data, load_examples(store, data)


def test_prepare_pretrain_truncation_csft_and_prm(memory_store, tiny_model_dir, pairs_file,
                                                  prm_file):
    tiny = str(tiny_model_dir)
    cfg = _data(dataset=str(pairs_file), input_key="output", max_len=8,
                            max_samples=10)
    data, ex = _prepare(memory_store, cfg, "sft", tiny, pretrain_mode=True)
    train = ex["train"]
    assert data.train_rows == 10 and data.metrics["data/truncated"] == 10.0
    assert all(len(ids) == 8 and m == [1] * 8 for ids, m in zip(train["input_ids"],
                                                                 train["loss_mask"], strict=True))
    csft = _data(dataset=str(pairs_file), max_samples=4)
    data, ex = _prepare(memory_store, csft, "csft", tiny, eval=EvalConfig(ratio=0.25))
    assert (data.train_rows, data.eval_rows) == (3, 1)
    assert all("\n<rm_score>: " in p for p in ex["train"]["prompt"])
    prm = _data(dataset=str(prm_file), apply_chat_template=False, label_key="value",
                            placeholder_token="#", max_samples=2)
    _, ex = _prepare(memory_store, prm, "prm", tiny)
    tok = load_tokenizer(tiny)
    plus, minus, hash_id = (tok(t, add_special_tokens=False)["input_ids"][0] for t in "+-#")
    for ids, labels in zip(ex["train"]["input_ids"], ex["train"]["labels"], strict=True):
        at = [i for i, t in enumerate(ids) if t == hash_id]
        assert len(at) == 3 and {labels[i] for i in at} <= {plus, minus}
        assert all(v == -100 for i, v in enumerate(labels) if i not in at)


def test_micro_batches_sum_to_one_batch_and_dpo_starts_at_log2(memory_store, tiny_model_dir,
                                                               pairs_file):
    torch.manual_seed(0)
    tiny = str(tiny_model_dir)
    model = load_causal_lm(tiny)
    sft_cfg = _data(dataset=str(pairs_file), max_samples=8)
    _, ex = _prepare(memory_store, sft_cfg, "sft", tiny)
    ctx = Context(ex["train"], 3, spec=None)
    idx = list(range(8))
    denom = step_denominator(objective("sft").token_level, ctx, idx)
    with torch.no_grad():
        whole = sft(model, idx, ctx, denom).loss
        parts = sft(model, idx[:3], ctx, denom).loss + sft(model, idx[3:], ctx, denom).loss
    assert whole.item() == pytest.approx(parts.item(), rel=1e-5)
    assert denom == sum(sum(m[1:]) for m in ex["train"]["loss_mask"])

    pairs = _data(dataset=str(pairs_file), apply_chat_template=False, max_samples=8)
    _, ex = _prepare(memory_store, pairs, "dpo", tiny)
    ref = {k: torch.tensor(v, dtype=torch.float64)
           for k, v in _split_logps(model, ex["train"], 3, 4, with_kl=False).items() if k != "kl"}
    spec = TrainSpec(kind="dpo", loss=DPOModelConfig(), train_batch_size=8,
                     micro_train_batch_size=4, save_steps=1, eval_steps=1)
    with torch.no_grad():
        out = dpo(model, [0, 1, 2, 3], Context(ex["train"], 3, spec, ref), 4.0)
    assert float(out.loss) == pytest.approx(math.log(2), abs=1e-5)
    assert out.per_example["loss"] == pytest.approx([math.log(2)] * 4, abs=1e-5)


def test_packed_sft_equals_padded(memory_store, tiny_model_dir, pairs_file):
    tiny = str(tiny_model_dir)
    model = load_causal_lm(tiny)
    _, ex = _prepare(memory_store, _data(dataset=str(pairs_file), max_samples=6),
                     "sft", tiny)
    spec = TrainSpec(kind="sft", loss=None, train_batch_size=6,
                     micro_train_batch_size=6, save_steps=1, eval_steps=1, packing=True)
    idx = list(range(6))
    padded_ctx, packed_ctx = Context(ex["train"], 3, None), Context(ex["train"], 3, spec)
    denom = step_denominator(objective("sft").token_level, padded_ctx, idx)
    with torch.no_grad():
        padded, packed = sft(model, idx, padded_ctx, denom), sft(model, idx, packed_ctx, denom)
    tol = network_bound(model.config, padded.loss.item())  # tests/tolerance.py
    assert packed.loss.item() == pytest.approx(padded.loss.item(), abs=tol)
    assert packed.per_example["loss"] == pytest.approx(padded.per_example["loss"], abs=tol)
    assert packed.per_example["n_tokens"] == padded.per_example["n_tokens"]


def test_multi_turn_sft_masks_assistant_turns_only(memory_store, tiny_model_dir, tmp_path):
    path = tmp_path / "chat.jsonl"
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
             {"role": "user", "content": "and?"}, {"role": "assistant", "content": "ok"}]
    path.write_text(json.dumps({"messages": turns}) + "\n")
    cfg = _data(dataset=str(path), input_key="messages", output_key=None)
    _, ex = _prepare(memory_store, cfg, "sft", str(tiny_model_dir))
    tok = load_tokenizer(str(tiny_model_dir))
    ids, mask = ex["train"]["input_ids"][0], ex["train"]["loss_mask"][0]
    learned = tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert learned == "yo<|im_end|>ok<|im_end|>"


def test_fingerprint_changes_when_a_local_file_changes(tmp_path):
    from alignflow.tasks.offline.fingerprint import fingerprint

    data = tmp_path / "d.jsonl"
    data.write_text('{"a": 1}\n')
    first = fingerprint(str(data), "alignflow:gsm8k-sft")
    assert fingerprint(str(data), "alignflow:gsm8k-sft") == first
    data.write_text('{"a": 12}\n')
    assert fingerprint(str(data), "alignflow:gsm8k-sft") != first
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    before = fingerprint(str(folder))
    (folder / "model.safetensors").write_bytes(b"x")
    assert fingerprint(str(folder)) != before != fingerprint("smollm2-135m")


def test_kto_reads_openrlhf_unpaired_rows_and_starts_at_one_half(memory_store, tiny_model_dir,
                                                                 tmp_path):
    """OpenRLHF's KTO data: one response per row with a 1/0 label. At the start (policy =
    reference) every response's loss is λ·(1 − σ(0)) = λ/2."""
    path = tmp_path / "unpaired.jsonl"
    rows = [{"input": f"Q{i}", "output": f"A{i}", "label": i % 2} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tiny = str(tiny_model_dir)
    cfg = _data(dataset=str(path), apply_chat_template=False, label_key="label",
                            output_key="output", input_template="User: {}\nAssistant: ")
    _, ex = _prepare(memory_store, cfg, "kto", tiny)
    train = ex["train"]
    assert [bool(c) for c in train["chosen_ids"]] == [False, True, False, True]
    assert [bool(r) for r in train["rejected_ids"]] == [True, False, True, False]
    assert train["prompt"][0] == "User: Q0\nAssistant: "
    model = load_causal_lm(tiny)
    ref = {k: torch.tensor(v, dtype=torch.float64)
           for k, v in _split_logps(model, train, 3, 4, with_kl=True).items()}
    spec = TrainSpec(kind="kto", loss=KTOModelConfig(undesirable_loss_weight=2.0),
                     train_batch_size=4, micro_train_batch_size=4, save_steps=1, eval_steps=1)
    with torch.no_grad():
        out = kto(model, [0, 1, 2, 3], Context(train, 3, spec, ref), 4.0)
    assert out.per_example["loss"] == pytest.approx([1.0, 0.5, 1.0, 0.5], abs=1e-6)
    assert float(out.loss) == pytest.approx(0.75, abs=1e-6)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"input": "q", "output": "a", "label": "good"}) + "\n")
    with pytest.raises(ConfigError, match="row 0: label='good'; expected 1/true"):
        _prepare(memory_store, _data(dataset=str(bad), apply_chat_template=False,
                                                 label_key="label"), "kto", tiny)
