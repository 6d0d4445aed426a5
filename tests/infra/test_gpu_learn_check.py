"""The node check `learn_bf16` (issue 43: learning on a GPU in bf16, and the engine-vs-trainer
log-prob gap) in its CPU mode, run as the runner runs it: the tiny model in fp32, a short
SFT → GRPO schedule, the held-out curve, and the gap between the HF engine's behaviour
log-probs and the learn step's π_old forward. On the CPU in fp32 that gap is float32
rounding (≤ `CPU_BOUND`, derived in the module); an engine whose log-probs are off (sampled
at another temperature) fails the check. The GPU mode's model and settings are checked
here too, so a typo does not first show on the rare GPU machine."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.gpu_check.checks import by_name, learn_bf16
from bench.gpu_check.checks.common import TAG

ROOT = Path(__file__).resolve().parents[2]
SFT_STEPS, ITERATIONS = learn_bf16.CPU_SCHEDULE
PROMPTS_A_STEP = 64  # examples/learn_arith.grpo_sets: rollout.batch_size
HELD_OUT = 200  # alignflow:arith-3's test split


def _check_line(out: Path, *args: str) -> dict:
    """The check's result line, run as `runner.run_one` runs it (its own process, -P)."""
    done = subprocess.run([sys.executable, "-P", "-m", "bench.gpu_check.checks.learn_bf16",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "GPU_CHECK_OUT": str(out)})
    tagged = [line for line in done.stdout.splitlines() if line.startswith(TAG)]
    assert done.returncode == 0 and tagged, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(tagged[-1][len(TAG):])


def test_cpu_mode_reports_the_curve_the_stage_times_and_a_rounding_sized_gap(tmp_path):
    line = _check_line(tmp_path, "cpu")
    assert line["status"] == "pass", line["error"]
    fig = line["figures"]
    assert (fig["mode"], fig["device"].split()[0], fig["perturbed"]) == ("cpu", "cpu", False)
    assert (fig["sft_steps"], fig["iterations"]) == (SFT_STEPS, ITERATIONS)
    assert [p["iteration"] for p in fig["curve"]] == [-1, ITERATIONS - 1]
    assert all(p["n"] == HELD_OUT and 0 <= p["correct"] <= 1 for p in fig["curve"])
    assert fig["stage_seconds"]["sft"] > 0 and fig["stage_seconds"]["grpo"] > 0
    gap = fig["gap"]
    assert gap["dtype"] == "fp32"
    # every prompt GRPO drew (distinct over its iterations), 8 samples each, ≤ 4 tokens each
    assert gap["samples"] == 8 * PROMPTS_A_STEP * ITERATIONS
    assert 0 < gap["tokens"] <= 4 * gap["samples"]
    assert 0 <= gap["p50"] <= gap["p90"] <= gap["p99"] <= gap["max"] <= learn_bf16.CPU_BOUND
    assert gap["outside_0.8_1.2"] == 0.0
    # the mean of 4k log-probs of size ~4, each off by ≤ CPU_BOUND
    assert gap["engine_mean_logp"] == pytest.approx(gap["trainer_mean_logp"],
                                                    abs=learn_bf16.CPU_BOUND)
    assert fig["summary"].startswith("cpu on cpu")


def test_an_engine_whose_log_probs_are_off_fails_the_check(tmp_path):
    """Sampling at temperature 2 while π_old scores at 1: the gap of vLLM's raw log-probs
    had its engine not rescaled them (engines/base.py). |Δ log p| = |log softmax(z/2) - log softmax(z)| ≫ rounding."""
    line = _check_line(tmp_path, "cpu", "perturb", "sft=1", "iterations=1")
    assert line["status"] == "fail"
    assert "max |d log p|" in line["error"][-1]
    gap = line["figures"]["gap"]
    assert line["figures"]["perturbed"] and gap["max"] > 10 * learn_bf16.CPU_BOUND
    assert gap["outside_0.8_1.2"] > 0


def test_quantiles_and_the_share_outside_the_ratio_band():
    delta = torch.tensor([0.0, 0.1, -0.3, 0.25, math.log(0.8) + 1e-6])  # exp: 1, 1.105, 0.741,
    found = learn_bf16.quantiles(delta)                                 # 1.284, 0.8+
    assert found["outside_0.8_1.2"] == pytest.approx(2 / 5)
    assert found["max"] == pytest.approx(0.3) and found["tokens"] == 5
    assert found["p50"] == pytest.approx(0.2231435, abs=1e-6)  # |log 0.8|, the middle value
    assert found["p50"] <= found["p90"] <= found["p99"] <= found["max"]


def test_the_gpu_mode_model_is_about_100m_and_its_settings_load(tiny_model_dir):
    from transformers import LlamaForCausalLM

    from alignflow.flows.config import load_config
    from alignflow.flows.offline.config import SFTConfig
    from alignflow.flows.rl.config import RLConfig
    from examples.learn_arith import SFT_LR, SFT_TASK, TASK, grpo_sets, sft_sets

    cfg = learn_bf16.gpu_config(Path(tiny_model_dir))
    with torch.device("meta"):
        params = sum(p.numel() for p in LlamaForCausalLM(cfg).parameters())
    assert 95e6 < params < 115e6 and cfg.head_dim == 64 and cfg.vocab_size == 512
    sft, grpo = learn_bf16.stage_sets("gpu", cfg.hidden_size, scale_lr=True)
    offline = load_config(SFTConfig, sets=[*sft_sets("m", SFT_TASK, learn_bf16.GPU_SFT_STEPS), *sft])
    assert (offline.ds.param_dtype, offline.placement.num_gpus) == ("bf16", 1.0)
    assert offline.adam.lr == pytest.approx(SFT_LR / 12, rel=1e-2)  # width 768 = 12 × 64
    rl = load_config(RLConfig, sets=[*grpo_sets("m", TASK, 30), *grpo])
    assert (rl.ds.param_dtype, rl.rollout.engine, rl.train.colocate_all) == ("bf16", "hf", True)
    assert rl.actor.adam.lr == pytest.approx(1e-3 / 12, rel=1e-2)
    assert learn_bf16.options([], cuda=True)["mode"] == "gpu"
    assert learn_bf16.options([], cuda=True)["sft_steps"] == learn_bf16.GPU_SFT_STEPS
    assert learn_bf16.options(["cpu"], cuda=True)["mode"] == "cpu"
    check = by_name()["learn_bf16"]
    assert not check.needs_cuda and check.timeout_s <= 480  # the runner's default end_by
