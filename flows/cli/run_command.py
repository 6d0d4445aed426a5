"""`alignflow run FLOW ...`: check the whole config, then a dry run's report, a detached or
supervised driver, or the run itself in this process (`outputs.start_or_resume`).

Argument errors of ours raise `ConfigError`/`FlowError`; the dispatcher prints one line."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import Any

from alignflow.flows.cli import clusters, supervise
from alignflow.flows.cli.arguments import run_parser
from alignflow.flows.cli.dry_run import format_dry_run
from alignflow.flows.cli.early import start_ray_early
from alignflow.flows.cli.outputs import start_or_resume
from alignflow.flows.cli.request import RunRequest
from alignflow.flows.cli.run_config import CheckedRun, check_run
from alignflow.flows.cli.run_help import print_config_help, print_run_help
from alignflow.flows.control import api, planning
from alignflow.flows.control.planning import resolve
from alignflow.tasks.plan.records import RunPlan
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
    asked = RunRequest.of(known, flags)
    if asked.from_shell and _plausible(asked.flow):
        print(f"alignflow: starting flow {asked.flow}", file=sys.stderr, flush=True)
    asked = replace(asked, planned_cluster=clusters.target(asked))
    if asked.executor == "ray":
        _maybe_start_ray_early(asked)  # Ray and a warm worker start while the config loads
    settled = [asked]  # the request once `auto` is settled from the run's plan

    def on_config(config: Any, plan: RunPlan | None) -> None:
        settled[0] = _choose_executor(asked, config, plan)

    checked = check_run(asked.flow, asked.config, list(asked.sets), list(asked.flags),
                        seed=asked.seed, ignore_hardware=asked.ignore_hardware,
                        on_config=on_config, cluster=asked.planned_cluster)
    request = settled[0]
    mark("config checked")
    planning.check_store(checked.plan, api.open_store(request.store))  # nodes share it?
    if request.dry_run:
        return _dry_run(request, checked)
    for note in checked.notes:
        print(f"note: {note}", file=sys.stderr)
    os.environ.update(checked.env)
    return _start(request, checked)


def _start(request: RunRequest, checked: CheckedRun) -> int:
    """Supervised, detached, on a simulated cluster or here."""
    if request.supervise and not request.detach:
        return _supervised(request, checked)
    if request.detach:
        from alignflow.flows.cli.detach import detach

        detach(request, list(request.flags), checked.config, api.open_store(request.store))
        return 0
    if request.simulate_cluster:
        output = clusters.run_simulated(
            request, checked, lambda there: start_or_resume(there, checked, progress()))
    else:
        output = start_or_resume(request, checked, progress())
    print_output(output)
    return 0


def _supervised(request: RunRequest, checked: CheckedRun) -> int:
    """`--supervise`: drivers come and go; a simulated cluster stays for all of them."""
    def drivers(there: RunRequest) -> int:
        return supervise.supervise_run(there, list(there.flags), checked)
    return clusters.run_simulated(request, checked, drivers) if request.simulate_cluster \
        else drivers(request)


def _dry_run(request: RunRequest, checked: CheckedRun) -> int:
    """The report, then a plan the cluster cannot hold refused in one line (exit 2)."""
    print(format_dry_run(request.flow, checked, request.executor))
    why = request.executor_why
    print(f"executor: {request.executor}" + (f" ({why})" if why else ""))
    if checked.plan is not None:
        checked.plan.check_fits()
    return 0


def _plausible(ref: str) -> bool:
    """A built-in name, an existing flow file or a module reference (checked cheaply: the
    first line comes before any heavy import; errors stay one line)."""
    from alignflow.flows.registry import BUILTIN

    path, sep, _ = ref.rpartition(":")
    return ref in BUILTIN or bool(sep and (not path.endswith(".py") or os.path.isfile(path)))


def _choose_executor(asked: RunRequest, config: Any, plan: RunPlan | None) -> RunRequest:
    """Settle `--executor auto` from the run's plan once the config is known (before its
    data and models are checked, so that Ray, when chosen, starts meanwhile)."""
    if asked.executor != "auto":
        return asked
    executor, why = resolve("auto", asked.address, config, plan)
    settled = replace(asked, executor=executor, executor_why=why)
    if executor == "ray":
        _maybe_start_ray_early(settled)
    elif not asked.dry_run:
        print(f"alignflow: running in this process: {why}", file=sys.stderr, flush=True)
    return settled


def _maybe_start_ray_early(request: RunRequest) -> None:
    local = not (request.address or request.simulate_cluster or request.dry_run
                 or request.supervise)
    if local and request.from_shell:
        start_ray_early(request.flow)


def progress() -> Any:
    """The progress display of a driver in this process (stderr)."""
    from alignflow.flows.cli.progress import Progress

    return Progress(stream=sys.stderr)


def print_output(output: Any) -> None:
    """The flow's result as JSON on stdout (nothing for None)."""
    from alignflow.flows.journal import codec

    if output is not None:
        print(codec.dumps(output))
