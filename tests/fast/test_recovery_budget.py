"""Recovery without a person, bounded per role (`flows/control/recovery.py`): a role replaced
within its budget lets the run finish; one replaced too often stops the run with one line;
a checkpoint lost with its process no longer fails the run (inline executor; no Ray)."""

from __future__ import annotations

import io
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from alignflow.artifacts.scope import current_scope
from alignflow.errors import TaskFailed
from alignflow.flows.cli.progress import Progress
from alignflow.flows.control import api, recovery
from alignflow.flows.engine import flow, task
from alignflow.flows.journal import runs
from alignflow.flows.ray.workers import worker_group
from tests import flows_for_tests as F


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.001")


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "counts"
    path.mkdir()
    return str(path)


def _run(store, cfg, run_id, out=None):
    progress = Progress(stream=out, live=False) if out is not None else None
    return api.run(F.retrying, cfg, store=store, run_id=run_id, executor="inline",
                   progress=progress)


def test_engines_restarted_within_their_budget_let_the_run_finish(local_store, folder):
    assert _run(local_store, {"dir": folder, "fail_times": 2, "exc": "engine"}, "r") == 3
    assert runs.read_run(local_store, "r")["recoveries"] == {"generation engines": 2}


def test_a_spent_budget_stops_the_run_with_one_line(local_store, folder, monkeypatch):
    monkeypatch.setenv(recovery.ENV, "2")
    cfg = {"dir": folder, "fail_times": 9, "exc": "engine", "max_retries": 5}
    with pytest.raises(TaskFailed) as info:
        _run(local_store, cfg, "r")
    assert str(info.value) == (
        "task 'flaky-0' failed: generation engines needed recovery 3 times, over its budget "
        "of 2 (--max-restarts, $ALIGNFLOW_MAX_RESTARTS); last fault: EngineError: attempt 3 "
        "failed; the run stops here: fix the cause, then `alignflow resume r`")
    assert F.count(folder, "flaky") == 3
    meta = runs.read_run(local_store, "r")
    assert (meta["status"], meta["recoveries"]) == (runs.FAILED, {"generation engines": 3})


def test_a_task_out_of_retries_is_recovered_by_re_forming_the_run(local_store, folder):
    out = io.StringIO()
    cfg = {"dir": folder, "fail_times": 1, "exc": "engine", "max_retries": 0}
    assert _run(local_store, cfg, "r", out) == 2
    assert "[run r] recovering (generation engines, 1 of 10): the run is re-formed from its " \
           "newest checkpoints after task 'flaky-0' failed: EngineError: attempt 1 failed" \
        in out.getvalue()
    assert api.get_status("r", store=local_store) == runs.SUCCESSFUL


def test_user_errors_and_other_system_faults_are_not_recovered(local_store, folder):
    with pytest.raises(TaskFailed, match="ValueError"):
        _run(local_store, {"dir": folder, "fail_times": 1, "exc": "value"}, "a")
    with pytest.raises(TaskFailed, match="TimeoutError"):  # retried, then the run fails
        _run(local_store, {"dir": folder, "fail_times": 9, "exc": "timeout",
                           "max_retries": 1}, "b")
    assert "recoveries" not in runs.read_run(local_store, "b")


class Saver:
    """A worker whose checkpoint write loses its process the first time (a node lost while
    a learn checkpoint is on its way), after the next task already used the learn's output."""

    def __init__(self) -> None:
        self.pool, self.total = ThreadPoolExecutor(max_workers=1), 0

    def restore(self, store, checkpoint: str) -> None:
        self.total = int(store.read_json(checkpoint)["total"])


USED = threading.Event()  # the inline executor runs every task in this process


@task(worker="saver")
def learn(obj: Saver, folder: str, x: int) -> dict:
    scope = current_scope()
    obj.total += x
    path = f"runs/{scope.run_id}/checkpoints/{scope.task_key}.json"
    runs_of_it = F.bump(folder, f"write-{x}")
    first = runs_of_it == 1
    if x == 2 and runs_of_it == 2 and os.path.exists(f"{folder}/lose-again"):
        raise ConnectionError("the replaced worker's node died too")

    def write() -> list:
        if first and x == 2:
            assert USED.wait(10)  # lost only once the flow has used this learn's output
            raise ConnectionError("the actor's node died while writing")
        scope.store.write_json(path, {"total": obj.total})
        return []
    scope.defer(obj.pool.submit(write))
    return {"total": obj.total, "checkpoint": path}


@task
def use(folder: str, total: int) -> int:
    F.bump(folder, f"use-{total}")
    if total == 3:  # learn-1's output is used: now its write may lose the process
        USED.set()
    return total


@flow
def learning(cfg: dict) -> list:
    worker_group("saver", Saver, num_cpus=0)
    return [use(cfg["dir"], learn(cfg["dir"], x)["total"]) for x in (1, 2, 3)]


def test_a_lost_checkpoint_is_written_again_without_re_forming_the_run(local_store, folder):
    USED.clear()
    out = io.StringIO()
    got = api.run(learning, {"dir": folder}, store=local_store, run_id="c", executor="inline",
                  progress=Progress(stream=out, live=False))
    assert got == [1, 3, 6]  # the replaced worker restored learn-0's total, not its own
    assert runs.read_run(local_store, "c")["recoveries"] == {"worker group 'saver'": 1}
    counts = {name: F.count(folder, name) for name in
              ("write-1", "write-2", "write-3", "use-1", "use-3", "use-6")}
    # learn-1 (and learn-2, if it had finished before the loss was seen) ran again from
    # learn-0's checkpoint; the task that used learn-1's output did not
    assert counts["write-1"] == counts["use-1"] == counts["use-3"] == counts["use-6"] == 1
    assert counts["write-2"] == 2 and counts["write-3"] in (1, 2)
    assert "the worker is replaced and runs" in out.getvalue()
    assert "re-formed" not in out.getvalue()
    manifests = runs.read_manifests(local_store, "c")
    assert manifests["learn-1"]["attempts"] == 2
    assert local_store.read_json(manifests["learn-1"]["checkpoint"]) == {"total": 3}


def test_a_lost_checkpoint_that_cannot_be_written_again_re_forms_the_run(local_store, folder):
    USED.clear()
    Path(folder, "lose-again").touch()  # the learn run again loses its process as well
    out = io.StringIO()
    got = api.run(learning, {"dir": folder}, store=local_store, run_id="c", executor="inline",
                  progress=Progress(stream=out, live=False))
    assert got == [1, 3, 6]  # bitwise what the undisturbed run gives
    assert "the worker is replaced and runs" in out.getvalue()
    assert "re-formed from its newest checkpoints" in out.getvalue()
    assert F.count(folder, "write-2") == 3 and F.count(folder, "use-1") == 1  # use-1: replayed
    assert F.count(folder, "use-3") == 2  # its commit was queued behind the lost one
    assert runs.read_run(local_store, "c")["recoveries"] == {"worker group 'saver'": 2}


def test_a_driver_started_by_a_person_counts_from_zero(local_store, folder, monkeypatch):
    _run(local_store, {"dir": folder, "fail_times": 1, "exc": "engine"}, "r")
    assert recovery.Budget(local_store, "r", keep=True).counts == {"generation engines": 1}
    assert recovery.Budget(local_store, "r").counts == {}  # a person's driver
    assert runs.read_run(local_store, "r")["recoveries"] == {}


def test_max_restarts_lasts_as_long_as_its_command(monkeypatch, tmp_path):
    """`--max-restarts` reaches the drivers a command starts through the environment, and
    is gone when the command returns (an in-process command left it to the next one)."""
    from alignflow.cli import main

    monkeypatch.delenv(recovery.ENV, raising=False)
    main(["resume", "no-such-run", "--store", str(tmp_path), "--max-restarts", "3"])
    assert recovery.ENV not in os.environ
    monkeypatch.setenv(recovery.ENV, "7")
    main(["resume", "no-such-run", "--store", str(tmp_path), "--max-restarts", "3"])
    assert recovery.limit() == 7


@task
def once_lost(folder: str, name: str) -> str:
    """Loses its engines the first time it runs (the fault a steady rain brings)."""
    from alignflow.errors import EngineError

    if F.bump(folder, name) == 1:
        raise EngineError(f"{name}: engines lost")
    return name


@flow
def rained_on(cfg: dict) -> list:
    return [once_lost.options(max_retries=0)(cfg["dir"], f"t{i}") for i in range(4)]


def test_recoveries_wait_only_when_nothing_was_committed_between_them(local_store, folder,
                                                                      monkeypatch):
    """A fault after progress is re-formed at once however many came before (the backoff
    grew with the role's count over the whole run: 30 s per fault after six); two or more
    in a row with nothing committed back off, doubling."""
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.5")
    waits: list[float] = []
    real_pause = recovery.Budget.pause

    def pause(budget, progressed: bool) -> float:  # recorded, not waited
        wait = real_pause(budget, progressed)
        if wait:
            waits.append(wait)
        return 0.0
    monkeypatch.setattr(recovery.Budget, "pause", pause)
    out = api.run(rained_on, {"dir": folder}, store=local_store, run_id="p", executor="inline")
    assert out == ["t0", "t1", "t2", "t3"] and waits == []
    assert runs.read_run(local_store, "p")["recoveries"] == {"generation engines": 4}
    _run(local_store, {"dir": folder, "fail_times": 3, "exc": "engine", "max_retries": 0}, "s")
    assert waits == [0.5, 1.0]  # the 2nd and 3rd recovery without a commit between
