"""Run the node checks in priority order, each in its own process, inside a fixed budget.

A GPU machine is lent for minutes, so the whole command must end inside 8: no check starts
after `start_before` seconds (7 minutes), and each gets at most its own limit or what is
left until `end_by` (8 minutes), whichever is less; a check past its limit is killed with
its whole process group (Ray, DeepSpeed and pytest children included) and fails. Every
check leaves one JSON line in the results file, written as it ends, so a run cut short
still says what it found. Checks that need CUDA are recorded `needs-cuda` without a
process when the versions check saw no CUDA device.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.gpu_check.checks import Check
from bench.gpu_check.checks.common import TAG

LOG_TAIL = 12


@dataclass(frozen=True)
class Budget:
    """Seconds since `started` (epoch) before which checks may start, and end."""

    started: float
    start_before: float = 420.0
    end_by: float = 480.0

    def elapsed(self) -> float:
        return time.time() - self.started

    def may_start(self) -> bool:
        return self.elapsed() < self.start_before

    def timeout_for(self, check: Check) -> float:
        """The check's own limit, cut to what is left until `end_by` (at least 1 s)."""
        return max(1.0, min(check.timeout_s, self.end_by - self.elapsed()))


@dataclass(frozen=True)
class Context:
    """How checks run: interpreter, environment, repository (the working directory)."""

    python: str
    env: dict[str, str]
    repo: Path
    logs: Path


def _record(check: Check, status: str, seconds: float, figures: dict | None = None,
            error: list[str] | None = None) -> dict:
    return {"name": check.name, "status": status, "seconds": round(seconds, 2),
            "figures": figures or {}, "error": error, "exercises": check.exercises,
            "expected": check.expected}


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _result_line(log: Path) -> dict | None:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    tagged = [line for line in lines if line.startswith(TAG)]
    return json.loads(tagged[-1][len(TAG):]) if tagged else None


def _log_tail(log: Path) -> list[str]:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    return [line for line in lines if not line.startswith(TAG)][-LOG_TAIL:]


def run_one(check: Check, ctx: Context, timeout: float) -> dict:
    """Runs one check's process; its result line, or a failure with the log's last lines."""
    ctx.logs.mkdir(parents=True, exist_ok=True)
    log = ctx.logs / f"{check.name}.log"
    start = time.perf_counter()
    with log.open("w") as sink:
        proc = subprocess.Popen([ctx.python, *check.argv], cwd=ctx.repo, env=ctx.env,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            return _record(check, "fail", time.perf_counter() - start,
                           error=[f"timed out after {timeout:.0f} s; killed", *_log_tail(log)])
        finally:
            _kill_group(proc)  # what the check left running (Ray, compilers) goes too
    seconds = time.perf_counter() - start
    found = _result_line(log)
    if found is None:
        return _record(check, "fail", seconds, error=[
            f"exited {proc.returncode} without a result line", *_log_tail(log)])
    return _record(check, found["status"], seconds, found["figures"], found["error"])


def _no_cuda(results: list[dict]) -> bool:
    """The versions check ran and saw no CUDA device."""
    versions = next((r for r in results if r["name"] == "versions"), None)
    return bool(versions) and versions["figures"].get("cuda_available") is False


def run_all(checks: list[Check], ctx: Context, budget: Budget, results: Path, *,
            spawn_all: bool = False) -> list[dict]:
    """Every check in order, each line appended to `results` as it ends."""
    done: list[dict] = []
    for check in checks:
        if not budget.may_start():
            line = _record(check, "skip", 0.0, {"reason": f"deadline: not started after "
                                                           f"{budget.start_before:.0f} s"})
        elif check.needs_cuda and not spawn_all and _no_cuda(done):
            line = _record(check, "needs-cuda", 0.0,
                           {"reason": "the versions check saw no CUDA device"})
        else:
            line = run_one(check, ctx, budget.timeout_for(check))
        done.append(line)
        with results.open("a") as f:
            f.write(json.dumps(line, default=str) + "\n")
        print(f"[{budget.elapsed():5.0f}s] {check.name}: {line['status']}", flush=True)
    return done
