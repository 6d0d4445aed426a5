"""`alignflow run/resume/status/ls/cancel/delete/logs/tick`: the flow engine's commands.

Argument errors of ours raise `ConfigError`/`FlowError`; the dispatcher prints one line.
The options live in `arguments.py`, `run` itself in `run_command.py` (it accepts unknown
OpenRLHF-style flags after FLOW and hands them to the config loader); here: the dispatch,
`resume`, `cancel`, `delete`, `tick`, `status`, `ls` and `logs`.
"""

from __future__ import annotations

import argparse
from typing import Any

from alignflow.errors import ConfigError, FlowError
from alignflow.flows.cli import supervise
from alignflow.flows.cli.arguments import configure
from alignflow.flows.cli.follow import follow
from alignflow.flows.cli.run_command import cmd_run, print_output, progress
from alignflow.flows.cli.views import print_logs, print_runs, print_status, warn_unreadable
from alignflow.flows.control import api

__all__ = ["configure", "run"]


def run(name: str, args: argparse.Namespace) -> int:
    """Execute command `name`; returns the exit code."""
    handler = _HANDLERS.get(name)
    if handler is None:
        raise FlowError(f"command {name!r} is not provided by the flow engine yet")
    if name in ("run", "resume", "tick"):
        _sigterm_as_interrupt()
    with supervise.budget_for_this_command():
        return handler(args)


def _sigterm_as_interrupt() -> None:
    """SIGTERM (e.g. a pod stopped) ends the driver like Ctrl-C: the run is marked RESUMABLE
    and the lease released, so the next driver need not wait for it to expire."""
    import signal
    import threading

    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def _cmd_resume(args: argparse.Namespace) -> int:
    supervise.set_budget(args)
    if args.sets and (args.all or not args.run_id):
        raise ConfigError("resume --set: expected one RUN_ID (a change to one run's config), "
                          "not --all")
    if args.supervise and args.run_id and not args.all:
        return supervise.supervise_resume(args)
    if args.all:
        def report(run_id: str, result: Any) -> None:
            failed = isinstance(result, str) and result.startswith("error: ")
            print(f"{run_id}: {result if failed else api.get_status(run_id, store=args.store)}",
                  flush=True)

        results = api.resume_all(args.store, executor=args.executor, address=args.address,
                                 trust=args.trust, trust_store=args.trust_store,
                                 on_result=report)
        warn_unreadable(api.open_store(args.store))
        failed = [r for r in results.values() if isinstance(r, str) and r.startswith("error: ")]
        return 1 if failed else 0
    if not args.run_id:
        raise ConfigError("resume: give RUN_ID or --all")
    output = api.resume(args.run_id, store=args.store, rerun_from=args.rerun_from,
                        force=args.force, executor=args.executor, address=args.address,
                        progress=progress(), flow=args.flow, trust=args.trust,
                        trust_store=args.trust_store, sets=args.sets)
    print_output(output)
    return 0


def _cmd_cancel(args: argparse.Namespace) -> int:
    api.cancel(args.run_id, store=args.store)
    print(f"{args.run_id}: CANCELED")
    return 0


def _cmd_delete(args: argparse.Namespace) -> int:
    api.delete(args.run_id, store=args.store)
    print(f"{args.run_id}: deleted")
    return 0


def _cmd_tick(args: argparse.Namespace) -> int:
    """One line per run advanced; exit 1 when any of them failed (cron sees it)."""
    failed = False
    for run_id, status in api.tick(args.store, address=args.address, trust=args.trust,
                                   trust_store=args.trust_store).items():
        print(f"{run_id}: {status}", flush=True)
        failed = failed or status.startswith("error: ") or status == "FAILED"
    warn_unreadable(api.open_store(args.store))
    return 1 if failed else 0


_HANDLERS = {
    "run": cmd_run, "resume": _cmd_resume, "cancel": _cmd_cancel, "delete": _cmd_delete,
    "tick": _cmd_tick,
    "status": lambda a: print_status(api.open_store(a.store), a.run_id),
    "ls": lambda a: print_runs(api.open_store(a.store)),
    "logs": lambda a: follow(api.open_store(a.store), a.run_id) if a.follow
    else print_logs(api.open_store(a.store), a.run_id, a.task_key),
}
