"""`bench/learn_vs_trl.py` (issue 43): both sides get the demo's work, derived from one
config, and the bench runs end to end in its CPU mode on the tiny model (the TRL side only
where TRL is installed, `.venv-trl` or this venv). Accuracies are not judged here: the
tiny random model answers no arithmetic; the 135M figures are the bench's own output."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignflow.flows.cli.demo import CHAT
from alignflow.tasks.data.generated import generated_rows
from bench.learn_vs_trl import curves, main, trl_python
from bench.learn_vs_trl_sides import TRL_SCHEDULE, prompts, settings, trl_args

pytestmark = pytest.mark.slow

TINY = ["--model", "tiny", "--seeds", "1", "--iterations", "2", "--threads", "1",
        "--set=data.max_samples=8", "--set=rollout.batch_size=4",
        "--set=rollout.n_samples_per_prompt=2", "--set=rollout.micro_batch_size=8",
        "--set=rollout.max_new_tokens=4", "--set=train.batch_size=4",
        "--set=train.micro_batch_size=2"]


def test_both_sides_read_the_demos_prompts_and_settings(tmp_path: Path):
    cfg = settings("smollm2-135m", 8, 2, [])
    train, test = prompts(cfg, "train"), prompts(cfg, "test")
    for got, split in ((train, "train"), (test, "test")):  # re-derived from the generator
        want = generated_rows("arith", split)[:cfg.data.max_samples]  # the demo's pool
        assert [g["prompt"] for g in got] == [CHAT.format(w["input"]) for w in want]
        assert [g["label"] for g in got] == [w["label"] for w in want]
    assert len(train) == len(test) == cfg.data.max_samples >= 64
    assert not {p["prompt"] for p in train} & {p["prompt"] for p in test}  # held out
    args = trl_args(cfg, 3, tmp_path)
    samples = cfg.rollout.batch_size * cfg.rollout.n_samples_per_prompt  # 64 per generation
    assert args["generation_batch_size"] == samples and args["num_generations"] == 8
    assert args["per_device_train_batch_size"] * args["gradient_accumulation_steps"] == 32
    assert args["max_steps"] == 8 * samples // 32  # 2 optimizer steps per generation
    assert (args["beta"], args["loss_type"], args["epsilon"], args["seed"]) == (0.0, "dapo", 0.2, 3)
    assert (args["learning_rate"], args["lr_scheduler_kwargs"]["min_lr_rate"]) == (
        cfg.actor.adam.lr, cfg.actor.min_lr_ratio)
    assert (args["adam_beta1"], args["adam_beta2"]) == cfg.actor.adam.betas
    assert args["max_completion_length"] == cfg.rollout.max_new_tokens == 16
    assert args["lr_scheduler_type"] == TRL_SCHEDULE  # the steps' lrs: tests/fast/test_learn_vs_trl_schedule.py


def _check_rows(rows: list[dict], sides: list[str]) -> None:
    assert [(r["seed"], r["side"]) for r in rows] == [(1, s) for s in sides]
    for r in rows:
        for acc in (r["start"], r["end"]):  # a share of the 8 held-out problems
            assert 0 <= acc <= 1 and (acc * 8) == int(acc * 8)
        assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["peak_rss_mib"] > 0
        assert not Path(r["model"]).exists()  # the temp folder is removed


def test_the_alignflow_side_runs_on_the_tiny_model():
    rows = main([*TINY, "--sides", "alignflow"])
    _check_rows(rows, ["alignflow"])
    assert rows[0]["iterations"] == 2
    log = rows[0]["log"]  # one entry per iteration: the rollouts' reward, the learn metrics
    assert [g["iteration"] for g in log] == [0, 1]
    assert all(0 <= g["reward"] <= 1 and g["lr"] > 0 and g["grad_norm"] >= 0 for g in log)


@pytest.mark.skipif(trl_python(None) is None, reason="TRL is not installed (make bench-trl)")
def test_the_trl_side_takes_as_many_optimizer_steps():
    rows = main([*TINY, "--sides", "alignflow,trl"])
    _check_rows(rows, ["alignflow", "trl"])
    assert rows[1]["steps"] == rows[0]["iterations"] * 8 // 4  # 8 samples, 4 per step
    assert [s["step"] for s in rows[1]["log"]] == [1, 2, 3, 4]  # TRL logs every step
    text = curves(rows)  # the lr is the one curve that is the same on both sides
    assert "seed 1: lr the same on both sides" in text, text
