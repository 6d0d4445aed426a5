"""On Ray: a task or worker-group actor that exits fails its task with one line naming the
task and the exit code (or, for a process that died without Python's clean-up, that Ray
does not know it); the run is FAILED, resumable after a fix."""

from __future__ import annotations

import pytest

from alignflow.artifacts.store import Store
from alignflow.errors import TaskFailed
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests import flows_for_tests as F

pytestmark = pytest.mark.slow


@pytest.fixture
def store(tmp_path, ray_local, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.01")
    return Store.open(str(tmp_path / "store"))


def _failure(store, flow, cfg) -> str:
    with pytest.raises(TaskFailed) as info:
        api.run(flow, cfg, store=store, run_id="r", executor="ray")
    assert api.get_status("r", store=store) == runs.FAILED
    return str(info.value)


def test_sys_exit_in_a_ray_task(store):
    assert _failure(store, F.exiting, {"code": 4}) == \
        "task 'exits-0' failed: SystemExit: the task called sys.exit(4) (exit code 4)"


def test_sys_exit_in_a_worker_group_actor(store):
    text = _failure(store, F.actor_exiting, {"code": 5, "hard": False})
    assert text == "task 'actor_exit-0' failed: SystemExit: the task called sys.exit(5) " \
                   "(exit code 5)"


DIED = ("died, exit code unknown (killed by a signal, the OOM killer, or os._exit) after 2 "
        "attempts; the run stops here: fix the cause, then `alignflow resume r`")
SPENT = "needed recovery 2 times, over its budget of 1 (--max-restarts, $ALIGNFLOW_MAX_RESTARTS)"


def test_a_ray_worker_process_that_dies(store, monkeypatch):
    """A lost process is recovered (the run re-formed) within the budget; a task that kills
    its process every time spends it and fails in one line naming the last fault."""
    monkeypatch.setenv("ALIGNFLOW_MAX_RESTARTS", "1")
    text = _failure(store, F.hard_exiting, {"code": 7})
    assert text == (f"task 'hard_exit-0' failed: tasks {SPENT}; last fault: "
                    f"WorkerCrashedError: its Ray worker process {DIED}")


def test_a_worker_group_actor_that_dies(store, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_MAX_RESTARTS", "1")
    text = _failure(store, F.actor_exiting, {"code": 6, "hard": True})
    assert text.startswith(f"task 'actor_exit-0' failed: worker group 'counter' {SPENT}; last "
                           "fault: ActorDiedError: the Ray actor of worker group 'counter' (pid ")
    assert text.endswith(DIED)
