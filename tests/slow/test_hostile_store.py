"""A hostile store (issue 20 §8): the commands cron runs (`resume --all`, `tick`) and
`resume RUN`, as child processes, against a store holding a tampered run per route
(`tests/hostile_routes.py`). For each route: no canary file appears, no socket leaves
127.0.0.1 (an audit hook in every child process records connects), nothing is written
outside the store, and the run gets one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alignflow.flows.config import load_config
from alignflow.flows.rl.config import RLConfig
from tests.hostile_routes import OUTSIDE, breaches, hook_env, meta_of, tamper, write_run

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict:
    return tamper(tmp_path_factory.mktemp("hostile"))


def _cli(ctx: dict, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ALIGNFLOW_STORE=str(ctx["store"]),
               ALIGNFLOW_TRUST_FILE=str(ctx["tmp"] / "none.toml"), **hook_env(ctx["tmp"]))
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(ROOT)])
    env.pop("ALIGNFLOW_TRUSTED_DIRS", None)
    return subprocess.run([sys.executable, "-m", "alignflow.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def _lines(proc: subprocess.CompletedProcess) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in proc.stdout.strip().splitlines()
                if ": " in line)


def test_resume_all_refuses_every_route_in_one_line_each(hostile):
    proc = _cli(hostile, "resume", "--all")
    lines = _lines(proc)
    assert breaches(hostile) == []
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout
    for run_id, words in hostile["expected"].items():
        assert run_id in lines and lines[run_id].startswith("error: "), (run_id, proc.stdout)
        assert words in lines[run_id], (run_id, lines[run_id])


def test_tick_refuses_every_route_and_a_stored_address(hostile):
    store = hostile["store"]
    for path in (store / "runs").glob("*/run.json"):
        meta = json.loads(path.read_text())
        meta.update(status="SLEEPING", wake_at=time.time() - 1)
        path.write_text(json.dumps(meta))
    write_run(store, meta_of("stored-address", load_config(RLConfig), status="SLEEPING",
                             wake_at=time.time() - 1, address=f"ray://{OUTSIDE}:10001"))
    proc = _cli(hostile, "tick")
    lines = _lines(proc)
    assert breaches(hostile) == [] and proc.returncode == 1
    assert "started on the Ray cluster" in lines["stored-address"]
    for run_id, words in hostile["expected"].items():
        assert words in lines[run_id], (run_id, lines[run_id])


@pytest.mark.parametrize("run_id", ["sources-spelled-as-url", "reward-url", "flow-module"])
def test_resume_of_one_run_is_one_error_line(hostile, run_id):
    path = hostile["store"] / "runs" / run_id / "run.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps(dict(meta, status="FAILED")))
    proc = _cli(hostile, "resume", run_id)
    assert breaches(hostile) == []
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert hostile["expected"][run_id] in errors[0] and "Traceback" not in proc.stderr
