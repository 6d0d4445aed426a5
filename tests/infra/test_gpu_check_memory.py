"""The one-GPU check's memory measurements, on CPU: `memory_plan` (issue 42: the memory
model's plan beside torch's per-phase peaks) planned, compared, printed and rehearsed on a
tiny shape; `sync_staging_7b` (issue 41: a 7B-shaped sync's extra peak) run at 1/32 scale,
and failing when a sync stages the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench.gpu_check import summary
from bench.gpu_check.checks import memory_plan, sync_staging
from bench.gpu_check.checks import memory_planned as mp
from bench.gpu_check.checks.common import TAG, CheckFailed
from tests.fast import test_sync_staging

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
BY_NAME = {s.name: s for s in mp.SETTINGS}


def test_every_setting_is_planned_by_phase_and_fits_an_80gb_gpu_with_room():
    plans = {s.name: mp.planned(s, mp.MODEL, mp.ROWS, mp.SEQ) for s in mp.SETTINGS}
    weights = 2 * 1_100_048_384  # TinyLlama-1.1B's parameters, bf16
    assert plans["zero3_ref"]["learn"] - plans["zero3"]["learn"] == weights  # the reference
    assert plans["zero3_ref"]["forward"] > plans["zero3"]["forward"] + weights
    for name, phases in plans.items():
        assert set(phases) == {"generate", "forward", "learn", "sync", "save"}
        assert phases["learn"] > phases["sync"] > weights, name
        assert max(phases.values()) < 40 * GIB, name


def test_a_setting_compares_its_peak_phase_and_prints_one_row():
    setting = BY_NAME["zero3_ref"]
    plan = {"forward": 9 * GIB, "learn": 12 * GIB, "sync": 8 * GIB}
    found = mp.compare(setting, {"forward": 10 * GIB, "learn": 10 * GIB, "sync": 8 * GIB}, plan)
    assert found["peak_phase"] == "forward"  # the measured peak's phase, ties to the first
    assert (found["measured_gib"], found["planned_gib"], found["error"]) == (10.0, 9.0, -0.1)
    assert found["phases"]["learn"]["error"] == 0.2 and found["phases"]["sync"]["error"] == 0
    line = mp.row("zero3_ref", found)
    assert line == "zero3_ref (peak in forward): forward measured 10.00 / planned 9.00 GiB " \
        "(-10.0%), learn measured 10.00 / planned 12.00 GiB (+20.0%), sync measured 8.00 / " \
        "planned 8.00 GiB (+0.0%)"
    unmeasured = mp.compare(setting, {p: None for p in setting.phases}, plan)
    assert unmeasured["peak_phase"] == "learn" and unmeasured["error"] is None
    assert "measured — / planned 12.00 GiB" in mp.row("zero3_ref", unmeasured)


def _figures(errors: dict[str, float | None]) -> dict:
    settings = {n: {"phases": {}, "peak_phase": "learn", "measured_gib": 1.0,
                    "planned_gib": 1.0, "error": e} for n, e in errors.items()}
    return {"settings": settings | {"zero2": {"skipped": "no DeepSpeed"}}}


def test_the_verdict_fails_a_peak_off_the_plan_by_more_than_15_percent():
    figures = memory_plan.verdict(_figures({"torch": -0.149, "zero3": 0.05}))
    assert figures["summary"] == "peak error: torch -14.9%, zero3 +5.0%; skipped zero2"
    with pytest.raises(CheckFailed, match=r"more than 15%: \['zero3 \+15\.1%'\]") as failed:
        memory_plan.verdict(_figures({"torch": 0.0, "zero3": 0.151}))
    assert failed.value.figures["settings"]["zero3"]["error"] == 0.151
    broken = _figures({"torch": 0.0})
    broken["settings"]["zero3"] = {"failed": "OutOfMemoryError: ..."}
    with pytest.raises(CheckFailed, match=r"did not run: \['zero3'\]"):
        memory_plan.verdict(broken)


def test_the_summary_prints_a_checks_rows_under_it():
    record = {"name": "memory_plan", "status": "pass", "seconds": 50.0,
              "figures": {"summary": "peak error: torch -1.0%",
                          "rows": ["torch (peak in learn): " + "x" * 100]}}
    lines = summary.table([record]).splitlines()
    assert lines[2].startswith("memory_plan")
    assert lines[3] == "    torch (peak in learn): " + "x" * 100
    assert lines[-1] == "totals: 1 pass"


def test_without_deepspeed_the_torch_setting_runs_and_zero_says_why(monkeypatch):
    """The CPU rehearsal of the PyTorch trainer's setting, in this process (the ZeRO ones
    need DeepSpeed's process group: the slow test below runs them in a process of their own)."""
    monkeypatch.setattr(memory_plan, "deepspeed_found", lambda: False)
    figures = memory_plan.measure(torch, torch.device("cpu"), mp.CPU_MODEL, mp.CPU_ROWS,
                                  mp.CPU_SEQ)
    settings = figures["settings"]
    assert settings["torch"]["phases"]["learn"]["planned_gib"] > 0
    assert settings["torch"]["measured_gib"] is None  # no CUDA allocator on the CPU
    for name in ("zero2", "zero3", "zero3_ref"):
        assert "DeepSpeed is not installed" in settings[name]["skipped"]
    assert figures["rows"][0].startswith("torch (peak in learn): learn measured — / planned")
    assert memory_plan.verdict(figures)["summary"] == \
        "no CUDA allocator: ran torch; skipped zero2, zero3, zero3_ref"


def _check_line(module: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-P", "-m", f"bench.gpu_check.checks.{module}",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=540,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    tagged = [line for line in done.stdout.splitlines() if line.startswith(TAG)]
    assert done.returncode == 0 and tagged, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(tagged[-1][len(TAG):])


@pytest.mark.slow
def test_memory_plan_rehearses_every_setting_on_the_cpu():
    """Every setting as the GPU runs it — ZeRO-2, ZeRO-3 and the ZeRO-3 reference engine
    included — on a tiny shape (DeepSpeed on the CPU builds its shared-memory op first)."""
    pytest.importorskip("deepspeed")
    line = _check_line("memory_plan", "cpu")
    assert line["status"] == "pass", line["error"]
    settings = line["figures"]["settings"]
    assert list(settings) == [s.name for s in mp.SETTINGS]
    assert set(settings["zero3_ref"]["phases"]) == {"forward", "learn", "sync"}


def test_a_7b_shaped_sync_at_1_32_stays_within_a_bucket_and_a_tensor():
    before = sys.modules.get("vllm.config")
    figures = sync_staging.check(["cpu"])
    assert sys.modules.get("vllm.config") is before  # the stand-ins for vLLM's API are gone
    assert figures["dims"] == {"hidden": 128, "mlp": 344, "vocab": 1000, "layers": 32}
    assert figures["version"] == 1 and figures["tensors_differing"] == 0
    assert 0 < figures["extra_peak_mib"] <= figures["bound_mib"] < figures["model_mib"] / 20


def test_the_sync_check_fails_when_the_model_is_staged_whole(monkeypatch):
    """As the worker held a sync before issue 41: every tensor kept until the commit."""
    kept = []

    def staged(model, weights):
        kept.extend((n, t.clone()) for n, t in weights)
        return set()

    def finish(model):
        model._load(kept)
        kept.clear()
    monkeypatch.setattr(test_sync_staging.LayerwiseModel, "load_weights", staged)
    monkeypatch.setattr(test_sync_staging.LayerwiseModel, "finish", finish)
    with pytest.raises(CheckFailed, match=r"above the weights; expected <= 0\.5"):
        sync_staging.check(["cpu"])


def test_the_7b_shape_is_cut_to_what_fits_beside_the_reservation():
    bucket = 128 << 20
    assert sync_staging.layers_that_fit(sync_staging.LLAMA_7B, 80 * GIB - (40 << 30),
                                        bucket) == 32
    few = sync_staging.layers_that_fit(sync_staging.LLAMA_7B, 10 * GIB, bucket)
    shapes = sync_staging.llama_shapes(4096, 11008, 32000, few)
    assert 1 < few < 32
    assert 2 * sync_staging._bytes(shapes)[0] + sync_staging.bound(shapes, bucket) <= 10 * GIB
    assert len(sync_staging.llama_shapes(*sync_staging.LLAMA_7B)) == 291  # Llama-2-7B's tensors
