"""Live logging from committed manifests: TensorBoard and W&B see every metric step once,
also across a SIGKILL and a resume (same TensorBoard folder and step axis, same W&B run),
a sample table per iteration carries the SQL of all its rollouts, `--logging_steps` thins
the steps, and the W&B API key never reaches the store."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.grpo import grpo
from alignflow.flows.tracking.tensorboard import logged_points

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def tb_points(folder: Path) -> collections.Counter:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    found: collections.Counter = collections.Counter()
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            found.update((v.tag, event.step) for v in event.summary.value)
    return found


def tb_text(folder: Path, tag: str) -> dict[int, str]:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    out = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            for v in event.summary.value:
                if v.tag == tag:
                    out[event.step] = tensor_util.make_ndarray(v.tensor).item().decode()
    return out


class FakeRun:
    def __init__(self, calls, **kw):
        self.calls, self.kw = calls, kw

    def define_metric(self, *a, **kw):
        pass

    def log(self, values):
        self.calls.append(("log", self.kw["id"], values))

    def finish(self):
        self.calls.append(("finish", self.kw["id"], None))


@pytest.fixture
def fake_wandb(monkeypatch):
    """A stand-in `wandb` module that records init ids and logged values."""
    import types

    calls: list = []
    module = types.ModuleType("wandb")
    module.init = lambda **kw: (calls.append(("init", kw["id"], kw)), FakeRun(calls, **kw))[1]
    module.Table = lambda columns, data: {"columns": columns, "data": data}
    module.Settings = types.SimpleNamespace
    monkeypatch.setitem(sys.modules, "wandb", module)
    return calls


def _sets(rl_sets, tb: Path, *extra: str) -> list[str]:
    return [*rl_sets, "max_iterations=3", f"logger.tensorboard_dir={tb}", *extra]


def test_tensorboard_and_wandb_log_each_step_once(rl_sets, tmp_path, fake_wandb, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    tb, store = tmp_path / "tb", tmp_path / "store"
    cfg = load_config(RLConfig, sets=_sets(rl_sets, tb, "logger.wandb.key=s3cr3t-k3y",
                                           "logger.sample_rows=3"))
    assert "WANDB_API_KEY" not in os.environ and cfg.logger.wandb.key == "true"
    api.run(grpo, cfg, store=str(store), run_id="live", executor="inline", seed=1)
    assert "s3cr3t" not in (store / "runs" / "live" / "run.json").read_text()
    points = tb_points(tb / "live")
    assert max(points.values()) == 1  # nothing twice
    assert {s for (tag, s) in points if tag == "rollout/reward_mean"} == {0, 1, 2}
    assert {s for (tag, s) in points if tag == "train/policy_loss"} == {0, 1, 2}
    with Catalog(str(store)) as cat:
        metric_keys = set(cat.sql("SELECT DISTINCT key FROM metrics").column(0).to_pylist())
        reward = cat.sql("SELECT avg(reward) FROM rollouts WHERE iteration = 1").to_pylist()
        sample = tb_text(tb / "live", "samples")[1]
        sql = sample.rsplit("`alignflow sql \"", 1)[1].rstrip('"`')
        assert cat.sql(sql).num_rows == 32  # the table's link returns all 8 x 4 rollouts
    assert metric_keys <= {tag for tag, _ in points}
    assert sample.count("\n| ") == 3  # three sample rows under the header
    inits = [c for c in fake_wandb if c[0] == "init"]
    logs = [c[2] for c in fake_wandb if c[0] == "log"]
    wandb_id = json.loads((store / "runs" / "live" / "logger.json").read_text())["wandb_id"]
    assert [c[1] for c in inits] == [wandb_id] and inits[0][2]["resume"] == "allow"
    assert inits[0][2]["settings"].api_key == "s3cr3t-k3y"  # handed to W&B, not the env
    rewards = [(v["iteration"], v["rollout/reward_mean"]) for v in logs if "rollout/reward_mean" in v]
    assert [i for i, _ in rewards] == [0, 1, 2]
    assert rewards[1][1] == pytest.approx(reward[0]["avg(reward)"], abs=1e-5)
    # an RL run has one axis, the iteration: its learn metrics are plotted against it too
    assert [v["iteration"] for v in logs if "train/policy_loss" in v] == [0, 1, 2]
    assert not any("global_step" in v for v in logs)


def test_logging_steps_thins_the_steps(rl_sets, tmp_path):
    tb = tmp_path / "tb"
    cfg = load_config(RLConfig, sets=_sets(rl_sets, tb), flags=["--logging_steps", "2"])
    api.run(grpo, cfg, store=str(tmp_path / "store"), run_id="thin", executor="inline")
    steps = {s for (tag, s) in logged_points(tb / "thin") if tag == "rollout/reward_mean"}
    assert steps == {0, 2}


def test_a_killed_and_resumed_run_continues_both_logs(rl_sets, tmp_path):
    pytest.importorskip("wandb")
    tb, store, wdir = tmp_path / "tb", tmp_path / "store", tmp_path / "wandb"
    wdir.mkdir()
    env = dict(os.environ, WANDB_MODE="offline", WANDB_DIR=str(wdir), WANDB_SILENT="true",
               ALIGNFLOW_LEASE_TTL="2")
    args = [sys.executable, "-m", "alignflow.cli", "run", "grpo", "--run-id", "k",
            "--executor", "inline", "--store", str(store), "--use_tensorboard", str(tb),
            "--use_wandb", "true"]
    for item in [*rl_sets, "max_iterations=4"]:
        args += ["--set", item]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    learned = store / "runs" / "k" / "tasks" / "iter-0001" / "learn.json"
    deadline = time.time() + 300
    while not learned.exists():
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run([sys.executable, "-m", "alignflow.cli", "resume", "k",
                              "--store", str(store), "--trust", str(tb)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert runs.read_run(api.open_store(str(store)), "k")["status"] == runs.SUCCESSFUL
    points = tb_points(tb / "k")
    assert max(points.values()) == 1
    for tag in ("rollout/reward_mean", "train/policy_loss", "samples"):
        assert {s for (t, s) in points if t == tag} == {0, 1, 2, 3}, tag
    wandb_id = json.loads((store / "runs" / "k" / "logger.json").read_text())["wandb_id"]
    attempts = sorted(p.name for p in (wdir / "wandb").glob("offline-run-*"))
    assert len(attempts) == 2 and all(a.endswith(f"-{wandb_id}") for a in attempts)
