"""`alignflow run/resume/status/ls/cancel/delete/logs/tick`: the flow engine's commands.

Argument errors of ours raise `ConfigError`/`FlowError`; the dispatcher prints one line.
`run` accepts unknown OpenRLHF-style flags after FLOW and hands them to the config loader.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from alignflow.errors import ConfigError, FlowError
from alignflow.flows.cli import clusters, supervise
from alignflow.flows.cli.dry_run import format_dry_run
from alignflow.flows.cli.early import start_ray_early
from alignflow.flows.cli.follow import follow
from alignflow.flows.cli.outputs import start_or_resume
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.cli.run_help import print_config_help, print_run_help
from alignflow.flows.cli.views import print_logs, print_runs, print_status, warn_unreadable
from alignflow.flows.control import api, planning
from alignflow.flows.control.planning import CHOICES, resolve
from alignflow.timeline import mark


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML config file")
    parser.add_argument("--set", dest="sets", metavar="KEY=VALUE", action="append", default=[],
                        help="override one dotted config key (repeatable)")
    parser.add_argument("--run-id", help="run id (default <flow>-<yyyymmdd-hhmmss>-<hex>)")
    parser.add_argument("--seed", type=int, default=None,
                        help="run seed (default 42, as OpenRLHF's --seed)")
    parser.add_argument("--executor", choices=CHOICES, default="auto",
                        help="auto (default: in this process when the run fits one, else Ray), "
                             "ray, or inline (no Ray)")
    parser.add_argument("--help-config", action="store_true",
                        help="list the flow's config keys (type, default, OpenRLHF flag) and exit")
    parser.add_argument("--detach", action="store_true",
                        help="run in a background process; print the run id and return")
    parser.add_argument("--dry-run", action="store_true",
                        help="check everything (flags, values, models, data, rewards), print the "
                             "config with where each value came from, and exit")
    parser.add_argument("--ignore-hardware", action="store_true",
                        help="run on this machine: GPU / vLLM / DeepSpeed flags become notes")
    clusters.add_options(parser)
    supervise.add_options(parser)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help="store URL (default $ALIGNFLOW_STORE or ./alignflow-store)")


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    """Add the arguments of command `name`."""
    if name == "run":
        parser.add_argument("flow", metavar="FLOW", help="built-in flow or path/to/file.py:function")
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        _run_options(parser)
    elif name == "resume":
        _resume_options(parser)
    elif name in ("status", "cancel", "delete"):
        parser.add_argument("run_id", nargs="?" if name == "status" else None, metavar="RUN_ID")
    elif name == "logs":
        parser.add_argument("run_id", metavar="RUN_ID")
        parser.add_argument("task_key", nargs="?", metavar="TASK_KEY")
        parser.add_argument("-f", "--follow", action="store_true",
                            help="print the driver's progress (kept in the store) and follow "
                                 "it until the run stops, from any machine that sees the store")
    _common(parser)
    if name in ("resume", "tick"):
        parser.add_argument("--trust", metavar="ITEM", action="append", default=[],
                            help="confirm what a stored run names beyond what this machine "
                                 "signed: a code file (accepted even if changed), a directory "
                                 "(code in it this machine never hashed; folders to write), a "
                                 "model or data source, a URL or a Ray address (repeatable; "
                                 "also $ALIGNFLOW_TRUSTED_DIRS and the trust file for folders "
                                 "and URLs)")
        parser.add_argument("--trust-store", action="store_true",
                            help="the store is yours: use what its runs recorded (code only "
                                 "with the hash it was recorded with)")
    if name in ("run", "resume", "tick"):
        parser.add_argument("--address", help="Ray address (auto, ray://host:10001); "
                                              "default: start Ray in-process")


def _resume_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", nargs="?", metavar="RUN_ID")
    parser.add_argument("--all", action="store_true", help="resume every resumable run")
    parser.add_argument("--rerun-from", metavar="TASK_KEY",
                        help="discard this task and every task committed after it first")
    parser.add_argument("--force", action="store_true",
                        help="take over a lease whose driver is gone")
    parser.add_argument("--executor", choices=["ray", "inline"], default=None,
                        help="default: the one the run was started with")
    parser.add_argument("--flow", metavar="FILE.py:FUNCTION",
                        help="the flow the run was started with (runs of user flows: "
                             "alignflow never imports a flow a store names)")
    parser.add_argument("--set", dest="sets", metavar="KEY=VALUE", action="append", default=[],
                        help="change one dotted config key no committed task has fixed, e.g. "
                             "a fix after a failure (repeatable)")
    supervise.add_options(parser)


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


def _run_parser() -> argparse.ArgumentParser:
    """`run`'s own options after FLOW; every other flag is the flow's (OpenRLHF's)."""
    # no abbreviations of alignflow's own options: a prefix is an OpenRLHF flag's (compat/era.py)
    parser = argparse.ArgumentParser(prog="alignflow run", add_help=False, allow_abbrev=False)
    _run_options(parser)
    _common(parser)
    parser.add_argument("--address", help="Ray address (auto, ray://host:10001)")
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    parser = _run_parser()
    known, flags = parser.parse_known_args(args.rest, namespace=args)
    supervise.set_budget(known)
    if known.help:
        return print_run_help(known.flow, parser)
    if known.help_config:
        return print_config_help(known.flow)
    if getattr(args, "from_shell", False) and _plausible(known.flow):
        print(f"alignflow: starting flow {known.flow}", file=sys.stderr, flush=True)
    known.planned_cluster = clusters.target(known)
    if known.executor == "ray":
        _maybe_start_ray_early(known)  # Ray and a warm worker start while the config loads
    checked = check_run(known.flow, known.config, known.sets, flags, seed=known.seed,
                        ignore_hardware=known.ignore_hardware,
                        on_config=lambda config, plan: _choose_executor(known, config, plan),
                        cluster=known.planned_cluster)
    mark("config checked")
    planning.check_store(checked.plan, api.open_store(known.store))  # nodes share it?
    if known.dry_run:
        return _dry_run(known, checked)
    for note in checked.notes:
        print(f"note: {note}", file=sys.stderr)
    os.environ.update(checked.env)
    if known.supervise and not known.detach:
        return _supervised(known, flags, checked)
    if known.detach:
        from alignflow.flows.cli.detach import detach

        detach(known, flags, checked.config, api.open_store(known.store))
        return 0
    if known.simulate_cluster:
        output = clusters.run_simulated(known, checked,
                                        lambda: start_or_resume(known, checked, _progress()))
    else:
        output = start_or_resume(known, checked, _progress())
    _print_output(output)
    return 0


def _supervised(known: argparse.Namespace, flags: list[str], checked: Any) -> int:
    """`--supervise`: drivers come and go; a simulated cluster stays for all of them."""
    def drivers() -> int:
        return supervise.supervise_run(known, flags, checked)
    return clusters.run_simulated(known, checked, drivers) if known.simulate_cluster \
        else drivers()


def _dry_run(known: argparse.Namespace, checked: Any) -> int:
    """The report, then a plan the cluster cannot hold refused in one line (exit 2)."""
    print(format_dry_run(known.flow, checked, known.executor))
    why = getattr(known, "executor_why", "")
    print(f"executor: {known.executor}" + (f" ({why})" if why else ""))
    if checked.plan is not None:
        checked.plan.check_fits()
    return 0


def _plausible(ref: str) -> bool:
    """A built-in name, an existing flow file or a module reference (checked cheaply: the
    first line comes before any heavy import; errors stay one line)."""
    from alignflow.flows.control.registry import BUILTIN

    path, sep, _ = ref.rpartition(":")
    return ref in BUILTIN or bool(sep and (not path.endswith(".py") or os.path.isfile(path)))


def _choose_executor(known: argparse.Namespace, config: Any, plan: Any) -> None:
    """Settle `--executor auto` from the run's plan once the config is known (before its
    data and models are checked, so that Ray, when chosen, starts meanwhile)."""
    if known.executor != "auto":
        return
    known.executor, why = resolve("auto", known.address, config, plan)
    known.executor_why = why
    if known.executor == "ray":
        _maybe_start_ray_early(known)
    elif not known.dry_run:
        print(f"alignflow: running in this process: {why}", file=sys.stderr, flush=True)


def _maybe_start_ray_early(known: argparse.Namespace) -> None:
    local = not (known.address or known.simulate_cluster or known.dry_run or known.supervise)
    if local and getattr(known, "from_shell", False):
        start_ray_early(known.flow)


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
                        progress=_progress(), flow=args.flow, trust=args.trust,
                        trust_store=args.trust_store, sets=args.sets)
    _print_output(output)
    return 0


def _progress() -> Any:
    from alignflow.flows.cli.progress import Progress

    return Progress(stream=sys.stderr)


def _print_output(output: Any) -> None:
    from alignflow.flows.journal import codec

    if output is not None:
        print(codec.dumps(output))


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
    "run": _cmd_run, "resume": _cmd_resume, "cancel": _cmd_cancel, "delete": _cmd_delete,
    "tick": _cmd_tick,
    "status": lambda a: print_status(api.open_store(a.store), a.run_id),
    "ls": lambda a: print_runs(api.open_store(a.store)),
    "logs": lambda a: follow(api.open_store(a.store), a.run_id) if a.follow
    else print_logs(api.open_store(a.store), a.run_id, a.task_key),
}
