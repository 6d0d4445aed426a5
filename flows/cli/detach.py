"""`alignflow run --detach`: start a run in a background process and return its id.

The config is checked here first (a bad flag fails at once, in the foreground); then a
new session runs the same command with a fixed `--run-id`, its output going to a log file,
and this process returns as soon as the run is recorded in the store.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alignflow.artifacts.store import Store
from alignflow.errors import FlowError
from alignflow.flows.journal import runs
from alignflow.flows.journal.identity import new_run_id
from alignflow.flows.loader import builtin_name, canonical_ref
from alignflow.flows.seams import FlowConfig

if TYPE_CHECKING:
    from alignflow.flows.cli.request import RunRequest

START_TIMEOUT_S = 600.0


def log_dir() -> Path:
    """Where detached drivers write their output (`~/.cache/alignflow/logs`)."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("alignflow")) / "logs"


def child_command(args: RunRequest, flags: list[str], run_id: str) -> list[str]:
    """The foreground `alignflow run` command the background process runs."""
    cmd = [sys.executable, "-m", "alignflow.cli", "run", args.flow, "--run-id", run_id,
           "--executor", args.executor]
    if args.seed is not None:  # unset: the child resolves it from the config, as here
        cmd += ["--seed", str(args.seed)]
    for name in ("config", "store", "address"):
        if getattr(args, name, None):
            cmd += [f"--{name}", getattr(args, name)]
    for item in args.sets:
        cmd += ["--set", item]
    return cmd + list(flags)


def run_name(ref: str, config: Any) -> str:
    """The name a run id starts with: the built-in name, else the flow function's name."""
    return builtin_name(canonical_ref(ref), config) or ref.rpartition(":")[2] or ref


def detach(args: RunRequest, flags: list[str], config: FlowConfig, store: Store) -> str:
    """Start the run in the background; returns its id once its run.json exists."""
    run_id = args.run_id or new_run_id(run_name(args.flow, config))
    log = log_dir() / f"{run_id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        cmd = child_command(args, flags, run_id) + (["--supervise"] if args.supervise else [])
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + START_TIMEOUT_S
    while not store.exists(runs.run_json(run_id)):
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
            raise FlowError(f"detached run {run_id!r} exited with code {proc.returncode} before "
                            f"it started: {tail[0]} (log: {log})")
        if time.time() > deadline:
            raise FlowError(f"detached run {run_id!r} did not start within "
                            f"{START_TIMEOUT_S:.0f} s (pid {proc.pid}, log: {log})")
        time.sleep(0.2)
    print(run_id)
    store_flag = f" --store {args.store}" if getattr(args, "store", None) else ""
    print(f"alignflow: {run_id} runs in the background (pid {proc.pid}); log: {log}; "
          f"follow it with `alignflow status {run_id}{store_flag}`", file=sys.stderr)
    return run_id
