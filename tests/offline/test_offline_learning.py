"""Offline flows learn on the tiny model: DPO / RM reach >= 90% held-out accuracy, SFT /
KD / PRM losses fall, KTO moves log-ratios the right way; the tables answer SQL."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from alignflow.catalog.catalog import Catalog
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.offline.batches import response_logps
from tests.offline.conftest import run_flow

pytestmark = pytest.mark.slow


def _metric(store: Path, run_id: str, key: str) -> list[tuple[int, float]]:
    with Catalog(str(store)) as cat:
        rows = cat.sql("SELECT step, value FROM metrics WHERE run_id = ? AND key = ? "
                       "ORDER BY step", [run_id, key]).to_pylist()
    return [(r["step"], r["value"]) for r in rows]


def _eval_pairs(store: Path) -> list[dict]:
    with Catalog(str(store)) as cat:
        return cat.sql("SELECT input_ids, chosen_ids, rejected_ids FROM offline_examples "
                       "WHERE split = 'eval' ORDER BY position").to_pylist()


def _logps(model_dir, rows: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    model = load_causal_lm(str(model_dir))
    pad = load_tokenizer(str(model_dir)).pad_token_id
    prompts = [r["input_ids"] for r in rows]
    with torch.no_grad():
        chosen = response_logps(model, prompts, [r["chosen_ids"] for r in rows], pad)
        rejected = response_logps(model, prompts, [r["rejected_ids"] for r in rows], pad)
    return chosen, rejected


def pair_sets(base_sets, pairs_file) -> list[str]:
    return [*base_sets, f"data.dataset={pairs_file}", "data.apply_chat_template=false",
            "eval.ratio=0.25"]


def test_dpo_lifts_heldout_preference_accuracy(base_sets, pairs_file, tmp_path):
    sets = [*pair_sets(base_sets, pairs_file), "adam.lr=1e-3",
            "train.max_epochs=2", "ckpt.save_steps=6", "eval.steps=6"]
    out = run_flow("dpo", sets, tmp_path, run_id="dpo")
    assert out["steps"] == 18 and len(out["loss"]) == 3  # 72 train pairs / 8, 2 epochs
    rows = _eval_pairs(tmp_path)
    assert len(rows) == 24
    base_dir = base_sets[0].split("=", 1)[1]
    ref_c, ref_r = _logps(base_dir, rows)
    # before training the implicit rewards tie (policy == reference): 50% with ties as
    # half; the base model's own log-probs do not already prefer the chosen responses
    raw_before = float((ref_c > ref_r).double().mean())
    pi_c, pi_r = _logps(tmp_path / out["model"], rows)
    after = float(((pi_c - ref_c) > (pi_r - ref_r)).double().mean())
    assert raw_before <= 0.75, raw_before
    margins = [v for _, v in _metric(tmp_path, "dpo", "eval/margin")]  # steps 6, 12, 18
    assert len(margins) == 3 and 0 < margins[0] < margins[1] < margins[2], margins
    assert after >= 0.9, after
    assert _metric(tmp_path, "dpo", "eval/accuracy")[-1] == (18, pytest.approx(after))
    # which examples had the highest loss at step 7: one query over `preferences`
    with Catalog(str(tmp_path)) as cat:
        top = cat.sql("SELECT pair_id, loss FROM preferences WHERE run_id = 'dpo' AND step = 7 "
                      "ORDER BY loss DESC LIMIT 3").to_pylist()
        n = cat.sql("SELECT count(*) AS n, count(DISTINCT step) AS s FROM preferences "
                    "WHERE run_id = 'dpo'").to_pylist()[0]
    assert len(top) == 3 and top[0]["loss"] >= top[2]["loss"] > 0
    assert n == {"n": 18 * 8, "s": 18}


def test_reference_is_cached_across_runs(base_sets, pairs_file, tmp_path):
    """A second run on the same data reuses prepare and reference; the IPO and cDPO losses
    at step 1 (policy == reference, h = 0) are the hand values (1/2β)² and log 2."""
    base = [*pair_sets(base_sets, pairs_file), "train.max_steps=1", "adam.lr=1e-3"]
    run_flow("dpo", [*base, "model.ipo_enable=true"], tmp_path, run_id="ipo")
    run_flow("dpo", [*base, "model.label_smoothing=0.2"], tmp_path, run_id="cdpo", seed=2)
    manifest = json.loads((tmp_path / "runs/cdpo/tasks/reference.json").read_text())
    assert manifest["cached_from"].startswith("runs/ipo/tasks/reference")
    assert _metric(tmp_path, "ipo", "train/loss") == [(1, pytest.approx(25.0, abs=1e-3))]
    assert _metric(tmp_path, "cdpo", "train/loss") == [(1, pytest.approx(math.log(2),
                                                                          abs=1e-5))]


def test_reward_model_reaches_heldout_accuracy_and_loads_as_rm(base_sets, pairs_file,
                                                                tmp_path):
    from transformers import AutoModelForSequenceClassification

    from alignflow.tasks.rewards.registry import build_source

    sets = [*pair_sets(base_sets, pairs_file), "adam.lr=3e-3",
            "train.max_epochs=3", "model.loss_type=logexp", "model.margin=0.5"]
    out = run_flow("rm", sets, tmp_path, run_id="rm")
    folder = tmp_path / out["model"]
    assert AutoModelForSequenceClassification.from_pretrained(folder).config.num_labels == 1
    with Catalog(str(tmp_path)) as cat:
        rows = cat.sql("SELECT prompt, response, rejected FROM offline_examples "
                       "WHERE split = 'eval' ORDER BY position").to_pylist()
    rm = build_source(str(folder))  # as `rewards.sources=<folder>` in the RL flows
    prompts = [r["prompt"] for r in rows]
    chosen = rm.score([r["prompt"] + r["response"] for r in rows], prompts,
                      [None] * len(rows))
    rejected = rm.score([r["prompt"] + r["rejected"] for r in rows], prompts,
                      [None] * len(rows))
    accuracy = float((chosen.rewards > rejected.rewards).float().mean())
    assert accuracy >= 0.9, accuracy
    assert _metric(tmp_path, "rm", "eval/accuracy")[-1][1] >= 0.9


def test_sft_loss_falls_on_assistant_tokens(base_sets, pairs_file, tmp_path):
    sets = [*base_sets, f"data.dataset={pairs_file}", "adam.lr=1e-2",
            "train.max_epochs=2", "ckpt.save_steps=8"]
    out = run_flow("sft", sets, tmp_path, run_id="sft")
    losses = _metric(tmp_path, "sft", "train/loss")
    assert len(losses) == out["steps"] == 24
    assert losses[-1][1] < 0.6 * losses[0][1], losses
    with Catalog(str(tmp_path)) as cat:
        row = cat.sql("SELECT s.n_tokens, e.loss_mask FROM sft_samples s JOIN "
                      "offline_examples e ON s.sample_id = e.example_id "
                      "WHERE s.run_id = 'sft' LIMIT 1").to_pylist()[0]
    # loss on the assistant reply only: reply tokens + <|im_end|>, minus none (mask[0] = 0)
    assert row["n_tokens"] == sum(row["loss_mask"]) < len(row["loss_mask"])
    with Catalog(str(tmp_path)) as cat:  # every train chunk's checkpoint is a row
        ckpts = cat.sql("SELECT task_key, step, kind, path FROM checkpoints WHERE run_id = 'sft' "
                        "ORDER BY step").to_pylist()
    assert [(c["task_key"], c["step"], c["kind"]) for c in ckpts] == [
        (f"train-{i:04d}", 8 * (i + 1), "model") for i in range(3)]
    assert ckpts[-1]["path"] == "runs/sft/checkpoints/train-0002"


def test_kto_moves_log_ratios_the_right_way(base_sets, pairs_file, tmp_path):
    sets = [*pair_sets(base_sets, pairs_file), "adam.lr=1e-3", "train.max_epochs=2",
            "data.label_key=null"]  # pairs, not OpenRLHF's unpaired rows
    run_flow("kto", sets, tmp_path, run_id="kto")
    chosen = _metric(tmp_path, "kto", "eval/chosen_reward")[-1][1]
    rejected = _metric(tmp_path, "kto", "eval/rejected_reward")[-1][1]
    assert chosen > 0 > rejected, (chosen, rejected)
    assert _metric(tmp_path, "kto", "eval/accuracy")[-1][1] >= 0.9


def test_distill_and_prm_losses_fall(base_sets, pairs_file, prm_file, tmp_path):
    teacher = run_flow("sft", [*base_sets, f"data.dataset={pairs_file}",
                               "adam.lr=1e-2"], tmp_path, run_id="teacher")
    sets = [*base_sets, f"data.dataset={pairs_file}", "adam.lr=1e-2",
            f"teacher.model_name_or_path={tmp_path / teacher['model']}", "ckpt.save_steps=6"]
    out = run_flow("distill", sets, tmp_path, run_id="kd")
    losses = _metric(tmp_path, "kd", "train/loss")
    assert len(out["loss"]) == 2 and losses[-1][1] < 0.6 * losses[0][1], losses
    sets = [*base_sets, f"data.dataset={prm_file}", "data.placeholder_token=#",
            "data.label_key=value", "data.reward_tokens=+,-", "data.apply_chat_template=false",
            "adam.lr=3e-3", "train.max_epochs=6"]
    run_flow("prm", sets, tmp_path, run_id="prm")
    losses = _metric(tmp_path, "prm", "train/loss")
    assert losses[0][1] == pytest.approx(math.log(2), abs=0.5)  # two reward tokens
    assert losses[-1][1] < 0.8 * losses[0][1], losses
