"""`alignflow run … --supervise` and `alignflow resume RUN --supervise`: no person is needed
when the driver dies.

The command runs the driver as a child process and waits for it. A driver that dies
(killed, out of memory, its machine's process lost) leaves its run RUNNING: the supervisor
starts `alignflow resume RUN` at once (a plain resume takes over the dead driver's lease),
up to the driver's budget (`--max-restarts`, `flows/control/recovery.py`), each restart said in one
line. A run that ended — finished, failed in user code, canceled, or out of a role's
budget — is left as it is: what a restart cannot fix needs a person. SIGINT and SIGTERM go
to the driver, and the supervisor stops with it (exit code the driver's).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from alignflow.artifacts.store import Store
from alignflow.flows.control import recovery
from alignflow.flows.control.live import backoff
from alignflow.flows.journal import runs

if TYPE_CHECKING:
    from alignflow.flows.cli.request import RunRequest
    from alignflow.flows.cli.run_config import CheckedRun


def resume_command(run_id: str, *, store: str | None, address: str | None,
                   flow: str | None = None, trust: tuple[str, ...] = ()) -> list[str]:
    """The plain `alignflow resume` a dead driver is replaced with."""
    cmd = [sys.executable, "-m", "alignflow.cli", "resume", run_id]
    for name, value in (("--store", store), ("--address", address), ("--flow", flow)):
        if value:
            cmd += [name, value]
    for item in trust:
        cmd += ["--trust", item]
    return cmd


def death(code: int) -> str:
    """How a driver ended, in words: `killed by SIGKILL`, `exit code 1`."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class Supervisor:
    """Runs `first` (the run's command), and `again` each time its driver dies."""

    pause = staticmethod(time.sleep)  # the crash-loop backoff's wait

    def __init__(self, store: Store, run_id: str, first: list[str], again: list[str]) -> None:
        self.store, self.run_id, self.first, self.again = store, run_id, first, again
        self.child: subprocess.Popen | None = None
        self.stopping = False
        self.restarts = 0

    def loop(self) -> int:
        """Drive the run to an end a restart cannot change; returns the exit code."""
        _leave_ray()
        before = self._forward_signals()
        try:
            return self._drivers()
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    def _drivers(self) -> int:
        from alignflow.flows.ray.adopt import SUPERVISED_ENV

        cmd, env, streak = self.first, dict(os.environ, **{SUPERVISED_ENV: "1"}), 0
        while True:
            committed = self._committed()
            self.child = subprocess.Popen(cmd, env=env, start_new_session=True)
            print(f"alignflow: supervising run {self.run_id}: driver pid {self.child.pid}",
                  file=sys.stderr, flush=True)
            code = self.child.wait()
            nxt = self._next(code, cmd)
            if nxt is None:
                return code
            streak = 0 if self._committed() > committed else streak + 1
            if not self._restart(code, streak):
                return 1
            cmd, env = nxt, dict(env, **{recovery.KEEP_ENV: "1"})

    def _committed(self) -> int:
        """Tasks the run has committed: a driver that added some was not crash-looping,
        however soon it died (faults every few seconds are not a crash loop)."""
        return len(self.store.list(f"runs/{self.run_id}/{runs.TASKS}", "*.json"))

    def _next(self, code: int, cmd: list[str]) -> list[str] | None:
        """The command that continues the run, or None when it must not be restarted."""
        if code == 0 or self.stopping:
            return None
        if not self.store.exists(runs.run_json(self.run_id)):
            return cmd if code < 0 else None  # killed before it recorded the run: again
        status = runs.read_run(self.store, self.run_id).get("status")
        return self.again if status in (runs.RUNNING, runs.RESUMABLE) else None

    def _restart(self, code: int, streak: int) -> bool:
        """Count the restart against the driver's budget and say it (one line)."""
        self.restarts += 1
        budget = recovery.limit()
        if self.restarts > budget:
            line = recovery.spent_line("the driver", self.restarts, budget, death(code),
                                       self.run_id)
            print(f"error: {line}", file=sys.stderr, flush=True)
            return False
        print(f"alignflow: the driver of run {self.run_id} died ({death(code)}); restarting "
              f"it ({self.restarts} of {budget}): alignflow resume {self.run_id}",
              file=sys.stderr, flush=True)
        if streak > 1:  # it keeps dying before it commits anything: give what it waits for time
            self.pause(backoff(streak - 1))
        return True

    def _forward_signals(self) -> dict:
        """SIGINT/SIGTERM to the driver (which marks the run RESUMABLE), and no restart;
        returns the handlers they had."""
        def forward(signum: int, _frame: Any) -> None:
            self.stopping = True
            if self.child is not None and self.child.poll() is None:
                self.child.send_signal(signum)

        return {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}


def _leave_ray() -> None:
    """A supervisor runs no flow: the cluster it joined to check the plan is left before
    its drivers join (a Ray Client connection held here doubled the head's per-client
    server start, and a driver's own connection timed out on a busy head)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def add_options(parser: Any) -> None:
    """`--supervise` and `--max-restarts` of `run` and `resume`."""
    parser.add_argument("--supervise", action="store_true",
                        help="restart the driver when it dies (alignflow resume RUN), and "
                             "replace dead workers, engines and nodes, without a person")
    parser.add_argument("--max-restarts", type=int, default=None, metavar="N",
                        help="recoveries each role (the driver, each worker group, the "
                             f"engines) may have in one run (default {recovery.DEFAULT}; "
                             f"${recovery.ENV})")


@contextlib.contextmanager
def budget_for_this_command() -> Iterator[None]:
    """`--max-restarts` (`set_budget`) lasts as long as the command that was given it: a
    command run in-process (a test, a notebook) leaves the environment as it found it."""
    before = os.environ.get(recovery.ENV)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(recovery.ENV, None)
        else:
            os.environ[recovery.ENV] = before


def set_budget(args: Any) -> None:
    """`--max-restarts N` for this driver and every driver it starts (their environment
    is inherited; `budget_for_this_command` restores it after)."""
    if getattr(args, "max_restarts", None) is not None:
        if args.max_restarts < 0:
            from alignflow.errors import ConfigError

            raise ConfigError(f"--max-restarts {args.max_restarts}: expected 0 or more")
        os.environ[recovery.ENV] = str(args.max_restarts)


def supervise_run(known: RunRequest, flags: list[str], checked: CheckedRun) -> int:
    """`alignflow run … --supervise`: the run's command in a child, restarted as a resume."""
    from alignflow.flows.cli.detach import child_command, run_name
    from alignflow.flows.cli.outputs import run_id_for
    from alignflow.flows.config.refs import references
    from alignflow.flows.control import api
    from alignflow.flows.journal.identity import new_run_id

    stem = os.path.basename(known.flow).split(":")[-1]
    run_id = run_id_for(stem, checked, known.run_id) or \
        new_run_id(run_name(known.flow, checked.config))
    trust = tuple(str(r.value) for r in references(checked.config))
    flow = known.flow if ".py:" in known.flow else None
    again = resume_command(run_id, store=known.store, address=known.address, flow=flow,
                           trust=trust)
    store = api.open_store(known.store)
    return Supervisor(store, run_id, child_command(known, flags, run_id), again).loop()


def supervise_resume(args: Any) -> int:
    """`alignflow resume RUN --supervise`: the resume in a child, restarted likewise."""
    from alignflow.flows.control import api

    again = resume_command(args.run_id, store=args.store, address=args.address,
                           flow=args.flow, trust=tuple(args.trust))
    if args.trust_store:
        again.append("--trust-store")
    first = list(again)
    if args.executor:
        first += ["--executor", args.executor]
    if args.force:
        first.append("--force")
    if args.rerun_from:
        first += ["--rerun-from", args.rerun_from]
    for item in args.sets:  # recorded in run.json by the first: the restarts need none
        first += ["--set", item]
    return Supervisor(api.open_store(args.store), args.run_id, first, again).loop()
