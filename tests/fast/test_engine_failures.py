"""Failures are loud and leave nothing lying: sys.exit in a task, the progress summary of
failed and interrupted runs, `resume --all` going on past a failure, secrets masked in
error texts, memory:// refused under Ray (inline executor; no Ray here)."""

from __future__ import annotations

import io
import json

import pytest

from alignflow.errors import ConfigError, FlowError, TaskFailed
from alignflow.flows.cli.progress import Progress
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests import flows_for_tests as F


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "counts"
    path.mkdir()
    return str(path)


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.01")


def run(flow, cfg, store, run_id, **kw):
    return api.run(flow, cfg, store=store, run_id=run_id, executor="inline", **kw)


@pytest.mark.parametrize(("code", "shown"), [(3, "sys.exit(3) (exit code 3)"),
                                             (None, "sys.exit(None) (exit code 0)"),
                                             ("bye", "sys.exit('bye') (exit code 1)")])
def test_sys_exit_in_a_task_fails_the_task_with_its_exit_code(local_store, code, shown):
    with pytest.raises(TaskFailed) as info:
        run(F.exiting, {"code": code}, local_store, "r")
    assert str(info.value) == f"task 'exits-0' failed: SystemExit: the task called {shown}"
    meta = api.get_metadata("r", store=local_store)
    assert (meta["status"], meta["error_task"]) == (runs.FAILED, "exits-0")


def _progress_of(store, flow, cfg, run_id) -> list[str]:
    out = io.StringIO()
    with pytest.raises(BaseException):  # noqa: B017 - each case raises its own kind
        run(flow, cfg, store, run_id, progress=Progress(stream=out, live=False))
    return out.getvalue().splitlines()


def test_progress_of_a_failed_run_never_says_finished(local_store, folder, tmp_path):
    (tmp_path / "counts" / "fail-1").write_text("")
    lines = _progress_of(local_store, F.steps, {"dir": folder, "n": 3}, "r")
    assert lines[-2].startswith("[run r] step-1 failed after")
    assert lines[-1].startswith("[run r] FAILED flow steps: 2 tasks "
                                "(0 cached, 1 failed)")
    assert not any("finished" in line for line in lines)


def test_progress_of_an_interrupted_run_says_how_to_continue(local_store, monkeypatch):
    def interrupt(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(F.step, "fn", interrupt)
    lines = _progress_of(local_store, F.steps, {"dir": "/nonexistent", "n": 1}, "r")
    assert lines[-1].startswith("[run r] interrupted flow steps: ")
    assert lines[-1].endswith("continue with `alignflow resume r`")
    assert api.get_status("r", store=local_store) == runs.RESUMABLE


def test_retries_are_announced(local_store, folder):
    out = io.StringIO()
    run(F.retrying, {"dir": folder, "fail_times": 1, "exc": "timeout"}, local_store, "r",
        progress=Progress(stream=out, live=False))
    lines = out.getvalue().splitlines()
    assert "[run r] flaky-0 attempt 1 failed (TimeoutError: attempt 1 failed); retrying in" \
        in "\n".join(lines)
    assert lines[-1].startswith("[run r] finished flow retrying")


def _crashed(store, folder, run_id):
    run(F.steps, {"dir": folder, "n": 2}, store, run_id)
    store.delete(runs.manifest_path(run_id, "step-1"))
    runs.update_run(store, run_id, status=runs.RUNNING)


def test_resume_all_reports_each_run_and_goes_on(local_store, folder, tmp_path):
    for run_id in ("a", "b", "c"):
        _crashed(local_store, folder, run_id)
    meta = runs.read_run(local_store, "b")
    local_store.write_json(runs.run_json("b"), meta | {"config": {"dir": folder}})  # no "n"
    seen = []
    results = api.resume_all(local_store, on_result=lambda r, res: seen.append(r))
    assert seen == ["a", "b", "c"]
    assert results["b"] == "error: KeyError: 'n'"  # not one of ours: not a FlowError
    assert [api.get_status(r, store=local_store) for r in "ac"] == [runs.SUCCESSFUL] * 2


def test_secrets_in_errors_and_logs_are_masked(local_store, monkeypatch):
    secret = "s3cr3t-v4lue-0123456789"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    with pytest.raises(TaskFailed) as info:
        run(F.leaking, {"var": "MY_SERVICE_TOKEN"}, local_store, "r")
    masked = "<redacted $MY_SERVICE_TOKEN>"
    assert masked in str(info.value) and secret not in str(info.value)
    meta = local_store.read_bytes(runs.run_json("r")).decode()
    log = local_store.read_bytes("runs/r/logs/leaky-0.log").decode()
    assert masked in json.loads(meta)["error"] and masked in log
    assert secret not in meta and secret not in log


def test_a_memory_store_is_refused_under_ray_before_anything_is_written(memory_store):
    with pytest.raises(ConfigError, match=r"in this process's memory, which Ray workers cannot "
                                          r"see; use --executor inline"):
        api.run(F.steps, {"dir": "/tmp", "n": 1}, store=memory_store, run_id="r",
                executor="ray")
    assert not memory_store.exists(runs.run_json("r"))


def test_an_unreachable_ray_cluster_fails_at_once_and_leaves_no_run(local_store, folder):
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nobody listens there
    start = time.monotonic()
    with pytest.raises(FlowError, match=rf"cannot connect to the Ray cluster at '127.0.0.1:"
                                        rf"{port}': \[Errno 111\] Connection refused; expected"):
        api.run(F.steps, {"dir": folder, "n": 1}, store=local_store, run_id="r",
                address=f"127.0.0.1:{port}")
    assert time.monotonic() - start < 30
    assert api.list_runs(local_store) == []


def test_an_address_is_checked_even_when_this_process_already_runs_ray(local_store, folder):
    """A process that already runs Ray (an earlier run, or in-process tests) neither skips the
    address nor runs on the wrong cluster."""
    import socket

    from alignflow.flows.ray import local as ray_local

    ray_local.start(quiet=True)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(FlowError, match=r"\[Errno 111\] Connection refused; expected"):
        api.run(F.steps, {"dir": folder, "n": 1}, store=local_store, run_id="r",
                address=f"127.0.0.1:{port}")
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        there = f"127.0.0.1:{other.getsockname()[1]}"
        with pytest.raises(FlowError, match=r"already joined to the Ray instance at"):
            api.run(F.steps, {"dir": folder, "n": 1}, store=local_store, run_id="r",
                    address=there)
    assert api.list_runs(local_store) == []


def test_a_worker_that_fails_to_start_fails_its_task_with_why(local_store, folder):
    with pytest.raises(TaskFailed) as info:
        run(F.unbuildable, {"dir": folder}, local_store, "r")
    assert str(info.value) == ("task 'add-0' failed: WorkerStartFailed: worker group 'counter' "
                               "failed to start: ModuleNotFoundError: No module named 'vllm'")
    assert "preload" in local_store.read_bytes("runs/r/logs/add-0.log").decode()  # traceback


def test_a_pool_process_that_fails_to_install_a_group_keeps_the_error(local_store):
    from alignflow.flows.ray.worker_host import WorkerHost

    host = WorkerHost(None)  # a warm pool actor: becomes the group's host by `install`
    host.install(F.Unbuildable, "policy")
    host.restore(local_store, "runs/r/checkpoints/x")  # no AttributeError on a None object
    call = {"store": local_store, "run_id": "r", "task_key": "iter-0000/generate", "seed": 1,
            "attempt": 1, "fn": F.add, "args": ("x", 1), "kwargs": {}, "worker": "policy"}
    error = host.call(call)["error"]
    assert (error["type"], error["kind"]) == ("WorkerStartFailed", "user")
    assert error["message"] == ("worker group 'policy' failed to start: "
                                "ModuleNotFoundError: No module named 'vllm'")
