"""`alignflow tick` advances only due runs, on the address each was started with when this
machine confirms it; an interrupted run waits for `alignflow resume`. Built-in variants keep
their own names."""

from __future__ import annotations

import time

import pytest

from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests import flows_for_tests as F


@pytest.fixture
def store(tmp_path):
    return Store.open(str(tmp_path / "store"))


def test_tick_leaves_an_interrupted_run_to_resume(store, tmp_path):
    api.run(F.steps, {"dir": str(tmp_path), "n": 2}, store=store, run_id="r", executor="inline")
    store.delete(runs.manifest_path("r", "step-1"))
    runs.update_run(store, "r", status=runs.RESUMABLE)
    assert api.tick(store) == {}
    assert api.get_status("r", store=store) == runs.RESUMABLE
    assert [s.step for s in api.resume("r", store=store)] == [0, 1]


def test_tick_resumes_on_the_recorded_address(store, tmp_path, monkeypatch):
    api.run(F.sleepy, {"dir": str(tmp_path), "seconds": 0.2}, store=store, run_id="s",
            executor="inline", block=False, address="ray://head:10001")
    assert runs.read_run(store, "s")["address"] == "ray://head:10001"
    seen = []
    monkeypatch.setattr(api, "resume", lambda run_id, **kw: seen.append((run_id, kw["address"])))
    assert api.tick(store, now=time.time() - 60) == {}  # not due: the wake time is ahead
    api.tick(store, now=time.time() + 60)  # this machine signed the address it was given
    assert seen == [("s", "ray://head:10001")]
    seen.clear()
    meta = runs.read_run(store, "s")
    store.write_json(runs.run_json("s"), {k: v for k, v in meta.items() if k != "signature"})
    out = api.tick(store, now=time.time() + 60)  # the store alone cannot pick a cluster
    assert seen == [] and "started on the Ray cluster 'ray://head:10001'" in out["s"]
    assert "--address ray://head:10001" in out["s"] and "--trust-store" in out["s"]
    api.tick(store, now=time.time() + 60, trust_store=True)  # the user's own store
    api.tick(store, now=time.time() + 60, trust=["ray://head:10001"])
    assert seen == [("s", "ray://head:10001")] * 2
    seen.clear()
    api.tick(store, now=time.time() + 60, address="auto")  # an explicit address wins
    assert seen == [("s", "auto")]


def test_builtin_variants_are_recorded_under_their_own_names(monkeypatch):
    from alignflow.flows.loader import builtin_name
    from alignflow.flows.rl.config import DrGRPOConfig, RLConfig, RLOOConfig

    assert builtin_name("grpo", RLOOConfig()) == "rloo"
    assert builtin_name("grpo", DrGRPOConfig()) == "dr_grpo"
    assert builtin_name("rloo", RLOOConfig()) == "rloo"
    assert builtin_name("grpo", RLConfig()) == "grpo"
    assert builtin_name("tests.flows_for_tests:steps", {}) is None


def test_ls_and_status_say_when_a_sleeping_run_wakes(store, tmp_path, capsys):
    from alignflow.flows.cli import views

    api.run(F.sleepy, {"dir": str(tmp_path), "seconds": 60}, store=store, run_id="s",
            executor="inline", block=False)
    wake = runs.read_run(store, "s")["wake_at"]
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wake))
    views.print_runs(store)
    views.print_status(store, "s")
    out = capsys.readouterr().out
    assert f"SLEEPING until {when}" in out.splitlines()[1]
    assert f"status=SLEEPING until {when}" in out
