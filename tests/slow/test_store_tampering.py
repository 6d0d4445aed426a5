"""Opening a store never runs code from it (issue 9 §1): a tampered run.json config, a
tampered task output, a flow reference naming a callable or a file, and a config naming a
code file are refused by `resume`, `resume --all`, `tick` and `status` — one clear line,
and the marker file the attack would create stays absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alignflow.flows.control import api

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
FLOWS = ROOT / "tests" / "flows_for_tests.py"


def _cli(store: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ALIGNFLOW_STORE=str(store))
    env.pop("ALIGNFLOW_TRUSTED_DIRS", None)
    return subprocess.run([sys.executable, "-m", "alignflow.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _edit_run(store: Path, run_id: str, **fields) -> None:
    path = store / "runs" / run_id / "run.json"
    meta = json.loads(path.read_text())
    meta.update(fields)
    path.write_text(json.dumps(meta))


@pytest.fixture
def failed_run(tmp_path) -> tuple[Path, Path]:
    """A run of a user flow file that failed at its third step (resumable)."""
    store, counts = tmp_path / "store", tmp_path / "counts"
    counts.mkdir()
    (counts / "fail-2").write_text("")
    with pytest.raises(Exception, match="planned failure"):
        api.run(f"{FLOWS}:steps", {"dir": str(counts), "n": 3}, store=str(store), run_id="r",
                executor="inline")
    (counts / "fail-2").unlink()
    return store, tmp_path / "marker"


def _popen(marker: Path) -> dict:
    return {"__type__": "subprocess:Popen", "fields": {"args": f"touch {marker}", "shell": True}}


def _refused(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2 and one `error:` line (progress lines may come before it) naming the needles."""
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and all(n in lines[0] for n in needles), lines[0]


def test_config_route(failed_run):
    store, marker = failed_run
    _edit_run(store, "r", config=_popen(marker))
    _refused(_cli(store, "resume", "r", "--flow", f"{FLOWS}:steps"), "runs/r/run.json",
             "'subprocess:Popen' is not registered")
    assert not marker.exists()


def test_typed_config_must_be_the_flows_class(tmp_path):
    store, marker = tmp_path / "store", tmp_path / "marker"
    from alignflow.config import load_config
    from alignflow.flows.loader import load_flow

    flow, cls = load_flow(f"{FLOWS}:typed")
    cfg = load_config(cls, sets=["n=1", f"dir={tmp_path}"])
    api.run(flow, cfg, store=str(store), run_id="t", executor="inline")
    _edit_run(store, "t", config=_popen(marker), status="FAILED")
    _refused(_cli(store, "resume", "t", "--flow", f"{FLOWS}:typed"),
             "the config is a 'subprocess:Popen', not the flow's config class")
    assert not marker.exists()


def test_output_route(failed_run):
    store, marker = failed_run
    manifest = store / "runs" / "r" / "tasks" / "step-0.json"
    data = json.loads(manifest.read_text())
    data["output"] = _popen(marker)
    manifest.write_text(json.dumps(data))
    (store / "runs" / "r" / "journal.json").unlink(missing_ok=True)
    _refused(_cli(store, "resume", "r", "--flow", f"{FLOWS}:steps"),
             "runs/r/tasks/step-0.json", "'subprocess:Popen' is not registered")
    assert not marker.exists()


def test_flow_ref_route_with_resume_all(failed_run):
    store, marker = failed_run
    _edit_run(store, "r", flow_ref="os:system", config=f"touch {marker}", status="RESUMABLE")
    evil = store.parent / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n")
    api.run(f"{FLOWS}:steps", {"dir": str(store.parent / "counts"), "n": 1}, store=str(store),
            run_id="r2", executor="inline")
    _edit_run(store, "r2", flow_ref=f"{evil}:flow", status="RESUMABLE")
    proc = _cli(store, "resume", "--all")
    out = dict(line.split(": ", 1) for line in proc.stdout.strip().splitlines())
    assert "never imports code a store names" in out["r"] and "'os:system'" in out["r"]
    assert "changed after this machine signed it" in out["r2"]
    assert "which this machine never hashed for the run" in out["r2"]
    assert not marker.exists()


def test_tick_route_and_status(failed_run):
    store, marker = failed_run
    evil = store.parent / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\nfrom alignflow import task\n"
                    "@task\ndef step(folder, i):\n    return i\n")
    _edit_run(store, "r", flow_ref=f"{evil}:steps", status="SLEEPING", wake_at=time.time() - 1)
    proc = _cli(store, "tick")
    assert proc.returncode == 1 and ("r: error: run 'r' (its record was changed after this "
                                     "machine signed it): it was started with flow") in proc.stdout
    assert "which this machine never hashed for the run" in proc.stdout
    status = _cli(store, "status", "r")  # reads the flow file as text: hashes, no import
    assert status.returncode == 0 and "code changed" in status.stdout, status.stderr
    assert not marker.exists()


def test_code_file_in_a_config_needs_trust(tmp_path):
    store, marker = tmp_path / "store", tmp_path / "marker"
    evil = tmp_path / "reward.py"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n"
                    "def reward_func(queries, prompts, labels):\n    return [0.0] * len(queries)\n")
    run_dir = store / "runs" / "g"
    run_dir.mkdir(parents=True)
    config = {"__type__": "alignflow.flows.rl.config:RLConfig",
              "fields": {"rewards": {"sources": [str(evil)]}, "max_iterations": 1}}
    (run_dir / "run.json").write_text(json.dumps({
        "format": 1, "run_id": "g", "flow": "grpo", "flow_ref": "grpo", "config": config,
        "seed": 0, "status": "FAILED", "created": time.time(), "executor": "inline"}))
    _refused(_cli(store, "resume", "g"), f"its config names code file '{evil}'", "--trust")
    assert not marker.exists()
