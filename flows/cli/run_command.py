"""`alignflow run FLOW ...`: check the whole config, then a dry run's report, a detached or
supervised driver, or the run itself in this process (`outputs.start_or_resume`).

Argument errors of ours raise `ConfigError`/`FlowError`; the dispatcher prints one line."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from alignflow.flows.cli import clusters, supervise
from alignflow.flows.cli.arguments import run_parser
from alignflow.flows.cli.dry_run import format_dry_run
from alignflow.flows.cli.early import start_ray_early
from alignflow.flows.cli.outputs import start_or_resume
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.cli.run_help import print_config_help, print_run_help
from alignflow.flows.control import api, planning
from alignflow.flows.control.planning import resolve
from alignflow.timeline import mark


def cmd_run(args: argparse.Namespace) -> int:
    """`alignflow run`: the exit code."""
    parser = run_parser()
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
    return _start(known, flags, checked)


def _start(known: argparse.Namespace, flags: list[str], checked: Any) -> int:
    """Supervised, detached, on a simulated cluster or here."""
    if known.supervise and not known.detach:
        return _supervised(known, flags, checked)
    if known.detach:
        from alignflow.flows.cli.detach import detach

        detach(known, flags, checked.config, api.open_store(known.store))
        return 0
    if known.simulate_cluster:
        output = clusters.run_simulated(known, checked,
                                        lambda: start_or_resume(known, checked, progress()))
    else:
        output = start_or_resume(known, checked, progress())
    print_output(output)
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


def progress() -> Any:
    """The progress display of a driver in this process (stderr)."""
    from alignflow.flows.cli.progress import Progress

    return Progress(stream=sys.stderr)


def print_output(output: Any) -> None:
    """The flow's result as JSON on stdout (nothing for None)."""
    from alignflow.flows.journal import codec

    if output is not None:
        print(codec.dumps(output))
