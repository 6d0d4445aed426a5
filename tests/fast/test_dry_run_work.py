"""`--dry-run` prints the work's size and a rough time on this machine, and warns in one
`note:` line when that is days (issue 47, item 13). The speed is a stored figure here
(100 GFLOP/s, about what a 2-core CPU of this kind measures), so the arithmetic is fixed:
the README's first run line is 1,024 prompts × 8 samples × 2,048 tokens = 16.8M tokens per
iteration; × 2 iterations × 134.5M parameters × 12 FLOP = 5.4e17 FLOP = 6.3 days."""

from __future__ import annotations

import json

import pytest

from alignflow.cli import main
from alignflow.flows.cli import speed
from tests.doc_commands import readme_runs

STORED = 1e11  # FLOP/s


@pytest.fixture
def stored_speed(tmp_path, monkeypatch):
    path = tmp_path / "speed.json"
    path.write_text(json.dumps({speed.machine_key(): {"flops": STORED, "device": "cpu",
                                                      "date": "2026-12-03"}}))
    monkeypatch.setenv("ALIGNFLOW_SPEED_FILE", str(path))
    return path


def _dry_run(argv, tmp_path, capsys) -> list[str]:
    assert main([*argv, "--dry-run", "--store", str(tmp_path / "store")]) == 0
    return capsys.readouterr().out.splitlines()


def test_the_readme_first_run_line_is_warned_it_takes_days(stored_speed, tmp_path, capsys):
    first = next(argv for argv in readme_runs() if argv[1] != "FLOW")  # not usage notation
    assert first[:2] == ["run", "grpo"] and "train.max_iterations=20" in first[-1]
    out = _dry_run(first, tmp_path, capsys)
    work = next(x for x in out if x.startswith("work: "))
    assert "1,024 prompts × 8 samples per iteration" in work
    assert "2,048 tokens each" in work and "16.8M tokens per iteration" in work
    time_line = next(x for x in out if x.startswith("time: "))
    assert "stored from a calibration on 2026-12-03" in time_line
    iterations = int(work.split("; ")[1].split(" iterations")[0])
    days = 1024 * 8 * 2048 * iterations * 134.5e6 * 12 / STORED / 86400
    assert f"roughly {days:,.1f} days" in time_line
    notes = [x for x in out if x.startswith("note: this run would take days")]
    assert len(notes) == 1


def test_a_tiny_job_gets_its_size_and_no_warning(stored_speed, tiny_model_dir, tmp_path,
                                                 capsys):
    out = _dry_run(["run", "grpo", "--set", f"actor.model_name_or_path={tiny_model_dir}",
                    "--set", "rollout.batch_size=2", "--set", "rollout.n_samples_per_prompt=2",
                    "--set", "rollout.max_new_tokens=16", "--set", "data.max_len=64",
                    "--set", "train.batch_size=4", "--set", "train.max_iterations=3",
                    "--set", "algo.kl.init_coef=0"], tmp_path, capsys)
    work = next(x for x in out if x.startswith("work: "))
    assert "2 prompts × 2 samples" in work and "= 256 tokens per iteration; 3 iterations" in work
    assert "time: roughly 0s on this machine" in "\n".join(out)
    assert not any("would take days" in x for x in out)


def test_the_speed_is_measured_once_then_read(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_SPEED_FILE", str(tmp_path / "speed.json"))
    calls: list[str] = []
    monkeypatch.setattr(speed, "_measure_in_child",
                        lambda: calls.append("cpu") or (5e10, 1.0, "cpu"))
    first, second = speed.machine_speed(), speed.machine_speed()
    assert first.how.startswith("measured for 1.0 s just now")
    assert second.how.startswith("stored from a calibration on ")
    assert first.flops == second.flops == 5e10 and len(calls) == 1


def test_the_child_measures_a_plausible_rate_and_names_its_device():
    flops, took, device = speed._measure_in_child()
    assert 1e8 < flops < 1e14 and took >= speed.MEASURE_S and device in ("cpu", "cuda")


def test_a_real_measurement_is_a_plausible_rate():
    flops, took = speed.measure("cpu", seconds=0.2)
    assert 1e8 < flops < 1e14 and 0.2 <= took < 5
