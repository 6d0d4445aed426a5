"""The cases of bench/fault_sweep.py: (set up a store, one command, what a user should see).

Each case's `group` is its row in the README's troubleshooting table."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from alignflow.flows.journal import procinfo, runs
from tests import flows_for_tests as F

SECRET = "sk-sweep-5ecr3t-0123456789"
STEPS = "tests.flows_for_tests:steps"


class Context:
    """A temp folder with a store, a counts folder and extra environment for the command."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.store, self.counts = tmp, tmp / "store", tmp / "counts"
        self.counts.mkdir()
        self.env: dict[str, str] = {}
        self.mounted: Path | None = None

    def open(self) -> Store:
        return Store.open(str(self.store))

    def run(self, run_id: str, n: int = 2, flow=F.steps, **cfg) -> None:
        api.run(flow, {"dir": str(self.counts), "n": n, **cfg}, store=self.open(),
                run_id=run_id, executor="inline")

    def crashed(self, run_id: str) -> None:
        """A run whose driver died after step-0."""
        self.run(run_id)
        self.open().delete(runs.manifest_path(run_id, "step-1"))
        runs.update_run(self.open(), run_id, status=runs.RUNNING)

    def cleanup(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.mounted)], check=False)


@dataclass
class Case:
    name: str
    group: str
    setup: Callable[[Context], object]
    argv: Callable[[Context], list[str]]
    pattern: str
    expect: str = "fail"  # "fail": non-zero exit, one error line; "ok": exit 0; "report":
    # non-zero exit, one line per run (resume --all)
    forbid: str | None = None
    after: Callable[[Context], bool] | None = field(default=None)
    breach: Callable[[Context], list[str]] | None = None  # what acted outside the store


def _corrupt(path: str, data: bytes = b"{broken"):
    def setup(ctx: Context) -> None:
        ctx.run("a")
        ctx.run("b")
        ctx.open().delete("runs/a/journal.json")
        if "/tasks/" in path:  # a run to resume
            runs.update_run(ctx.open(), "a", status=runs.FAILED)
        ctx.open().write_bytes(path, data)
    return setup


def _corrupt_parquet(ctx: Context) -> None:
    """Runs a and b of `blobs`; one of a's Parquet files is overwritten with garbage."""
    for run_id in ("a", "b"):
        ctx.run(run_id, flow=F.blobs, iters=2, rows=10)
    victim = sorted((ctx.store / "runs" / "a").rglob("*.parquet"))[0]
    victim.write_bytes(b"PAR1 not parquet")


def _lease(ctx: Context, host: str, pid: int) -> None:
    ctx.crashed("a")
    now = time.time()
    ctx.open().write_json("runs/a/lease/000000000009.json", {
        "owner": {"host": host, "pid": pid, "uuid": "f" * 32,
                  "boot": procinfo.boot_id(),
                  "pid_started": 1.0}, "heartbeat": now, "expires": now + 600})


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tombstone(ctx: Context) -> None:
    ctx.run("a")
    ctx.run("b")
    ctx.open().write_json(runs.tombstone_path("a"), {"run_id": "a"})


def _tiny_disk(ctx: Context) -> bool:
    disk = ctx.store.parent / "disk"
    disk.mkdir()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)],
                        capture_output=True).returncode == 0
    ctx.mounted, ctx.store = (disk if ok else None), disk / "store"
    return ok


FLOW_FILE = str(Path(__file__).resolve().parents[1] / "tests" / "flows_for_tests.py")


def _resume_all_mix(ctx: Context) -> None:
    """Three crashed runs of a flow file; b's config lost its key `n`."""
    for run_id in ("a", "b", "c"):
        api.run(f"{FLOW_FILE}:steps", {"dir": str(ctx.counts), "n": 2}, store=ctx.open(),
                run_id=run_id, executor="inline")
        ctx.open().delete(runs.manifest_path(run_id, "step-1"))
        runs.update_run(ctx.open(), run_id, status=runs.RUNNING)
    meta = runs.read_run(ctx.open(), "b")
    ctx.open().write_json(runs.run_json("b"), meta | {"config": {"dir": str(ctx.counts)}})


def _no_runs(ctx: Context) -> bool:
    return not ctx.store.exists() or api.list_runs(ctx.open()) == []


def _resumable(ctx: Context) -> bool:
    return api.get_status("d", store=ctx.open()) in (runs.FAILED, runs.RESUMABLE)


def _flow(ctx: Context, name: str, **cfg) -> list[str]:
    sets = [x for k, v in cfg.items() for x in ("--set", f"{k}={v}")]
    return ["run", f"tests.flows_for_tests:{name}", "--run-id", "r", "--executor", "inline",
            "--set", f"dir={ctx.counts}", *sets]


RESUME = ["--flow", STEPS]
CASES = [
    # a store with a bad file in it
    Case("ls: corrupt run.json", "corrupt or foreign file in the store",
         _corrupt("runs/a/run.json"), lambda c: ["ls"], r"warning: .*runs/a/run\.json is not "
         r"valid JSON(.|\n)*SUCCESSFUL|SUCCESSFUL(.|\n)*warning: .*runs/a/run\.json", "ok"),
    Case("status: corrupt run.json", "corrupt or foreign file in the store",
         _corrupt("runs/a/run.json"), lambda c: ["status", "a"], r"runs/a/run\.json is not valid"),
    Case("status other run: corrupt run.json", "corrupt or foreign file in the store",
         _corrupt("runs/a/run.json"), lambda c: ["status", "b"], r"status=SUCCESSFUL", "ok"),
    Case("ls: run.json is a list", "corrupt or foreign file in the store",
         _corrupt("runs/a/run.json", b"[1, 2]"), lambda c: ["ls"], r"warning: .*holds no run "
         r"record", "ok"),
    Case("status: corrupt manifest", "corrupt or foreign file in the store",
         _corrupt("runs/a/tasks/step-0.json"), lambda c: ["status", "a"],
         r"warning: .*step-0\.json is not valid JSON", "ok"),
    Case("resume: corrupt manifest", "corrupt or foreign file in the store",
         _corrupt("runs/a/tasks/step-0.json"), lambda c: ["resume", "a", *RESUME],
         r"step-0\.json is not valid JSON"),
    Case("status: corrupt journal snapshot", "corrupt or foreign file in the store",
         _corrupt("runs/a/journal.json", b"[]"), lambda c: ["status", "a"], r"step-1", "ok"),
    Case("sql: corrupt Parquet file", "corrupt or foreign file in the store",
         _corrupt_parquet, lambda c: ["sql", "select run_id, count(*) from metrics group by 1"],
         r"warning: corrupt or unreadable Parquet file .*runs/a/metrics/.*left out", "ok"),
    Case("status: corrupt Parquet file", "corrupt or foreign file in the store",
         _corrupt_parquet, lambda c: ["status", "a"], r"SUCCESSFUL", "ok"),
    Case("ls: deletion cut short", "a deletion cut short", _tombstone, lambda c: ["ls"],
         r"warning: run 'a' is being deleted; finish with `alignflow delete a`", "ok"),
    # runs in the wrong state
    Case("resume: unknown run", "a run that is not there or cannot be resumed",
         lambda c: None, lambda c: ["resume", "nope"], r"no run 'nope' in store"),
    Case("resume: SUCCESSFUL run", "a run that is not there or cannot be resumed",
         lambda c: c.run("a"), lambda c: ["resume", "a", *RESUME], r"already SUCCESSFUL"),
    Case("resume: CANCELED run", "a run that is not there or cannot be resumed",
         lambda c: (c.crashed("a"), api.cancel("a", store=c.open())),
         lambda c: ["resume", "a", *RESUME], r"is CANCELED"),
    Case("resume: lease of a live driver elsewhere", "another driver holds the run",
         lambda c: _lease(c, "other-host", 1), lambda c: ["resume", "a", *RESUME],
         r"held by driver other-host:1 .*--force"),
    Case("resume: driver killed -9 on this host", "the driver was killed (kill -9, OOM)",
         lambda c: _lease(c, socket.gethostname(), _dead_pid()),
         lambda c: ["resume", "a", *RESUME], r"StepOut", "ok"),
    Case("delete: live run", "deleting a live run", lambda c: _lease(c, "other-host", 1),
         lambda c: ["delete", "a"], r"cannot delete run 'a': it is live .*alignflow cancel a"),
    Case("delete: unknown run", "a run that is not there or cannot be resumed",
         lambda c: None, lambda c: ["delete", "nope"], r"no run 'nope'"),
    Case("resume: --rerun-from unknown key", "a run that is not there or cannot be resumed",
         lambda c: c.run("a"), lambda c: ["resume", "a", "--rerun-from", "x", *RESUME],
         r"--rerun-from 'x'"),
    Case("logs: unknown task", "a run that is not there or cannot be resumed",
         lambda c: c.run("a"), lambda c: ["logs", "a", "nope"], r"has no log for task 'nope'"),
    Case("cancel: unknown run", "a run that is not there or cannot be resumed",
         lambda c: None, lambda c: ["cancel", "nope"], r"no run 'nope'"),
    Case("status: empty store", "a run that is not there or cannot be resumed",
         lambda c: c.open().write_json("x.json", {}), lambda c: ["status"], r"no runs in store"),
    Case("resume --all: one run fails", "resume --all with a failing run", _resume_all_mix,
         lambda c: ["resume", "--all", "--trust", str(Path(FLOW_FILE).parent)],
         r"^a: SUCCESSFUL\nb: error: KeyError: 'n'\nc: SUCCESSFUL", "report"),
    # tasks that fail
    Case("task calls sys.exit(3)", "a task exits or its process dies", lambda c: None,
         lambda c: _flow(c, "exiting", code=3), r"task 'exits-0' failed: .*exit code 3"),
    Case("task process dies (os._exit), Ray", "a task exits or its process dies",
         lambda c: None, lambda c: ["run", "tests.flows_for_tests:hard_exiting", "--run-id",
                                    "r", "--set", "code=7"],
         r"task 'hard_exit-0' failed: .*died, exit code unknown"),
    Case("task process dies (os._exit), inline", "a task exits or its process dies",
         lambda c: None, lambda c: _flow(c, "hard_exiting", code=7), r"error: "),
    Case("task fails: progress summary", "a task raises", lambda c: (c.counts / "fail-1")
         .write_text(""), lambda c: _flow(c, "steps", n=3), r"planned failure at step 1",
         forbid=r"finished flow"),
    Case("task error quotes a secret", "a secret in an error", lambda c: None,
         lambda c: _flow(c, "leaking", var="SWEEP_API_KEY"), r"<redacted \$SWEEP_API_KEY>"),
    # the environment
    Case("memory:// store under Ray", "a store or cluster that cannot work",
         lambda c: None, lambda c: ["run", STEPS, "--store", "memory://x", "--set", "n=1"],
         r"Ray workers cannot see", after=_no_runs),
    Case("--address with nobody there", "a store or cluster that cannot work",
         lambda c: None, lambda c: ["run", STEPS, "--set", "n=1", "--address",
                                    f"127.0.0.1:{_closed_port()}"],
         r"cannot connect to the Ray cluster at .*Connection refused", after=_no_runs),
    Case("store URL with an unknown scheme", "a store or cluster that cannot work",
         lambda c: None, lambda c: ["ls", "--store", "ftp://x/y"], r"expected a local path"),
    Case("S3 endpoint down from the start", "a store or cluster that cannot work",
         lambda c: c.env.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{_closed_port()}",
                                AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="y"),
         lambda c: ["ls", "--store", "s3://bucket/p"], r"cannot reach the S3 endpoint"),
    Case("disk full", "the store's disk is full", _tiny_disk,
         lambda c: ["run", "tests.flows_for_tests:blobs", "--run-id", "d", "--executor",
                    "inline", "--store", str(c.store), "--set", "iters=6", "--set", "rows=30000"],
         r"no space left on the device of store", forbid=r"finished flow", after=_resumable),
    Case("unknown flow", "a bad command line", lambda c: None, lambda c: ["run", "nosuch"],
         r"nosuch"),
    Case("flow file missing", "a bad command line", lambda c: None,
         lambda c: ["run", "/nonexistent/flow.py:f"], r"/nonexistent/flow\.py"),
]
