"""The run plan as the engine sees it. A built-in flow's config makes its plan (`run_plan`,
built by `tasks/plan/`, which the engine never imports): the CLI and `run` take from it
the executor `--executor auto` picks; the driver records it in run.json when a run is first
driven and compares it on every resume; the flow body reads that settled plan (`current`).

run.json holds the plan as codec JSON, which decodes into allow-listed records only (a
store is data). A run recorded before plans existed has none: its plan is made when it
resumes, and recorded then.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol, runtime_checkable

from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError, FlowError
from alignflow.flows.engine import current_driver
from alignflow.flows.journal import codec, runs
from alignflow.flows.journal.runs import RunState
from alignflow.flows.seams import FlowConfig

CHOICES = ("auto", "ray", "inline")
NAMED = "a Ray cluster is named (--address)"
UNPLANNED = "the flow's config does not place its workers (user flows)"


@runtime_checkable
class Plan(Protocol):
    """What the engine reads of a plan (`tasks/plan/records.RunPlan`, frozen: read-only)."""

    @property
    def executor(self) -> str:
        """inline | ray: what the run needs."""

    @property
    def executor_reason(self) -> str:
        """Why it needs that executor."""

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles its hosts hold."""

    @property
    def colocated(self) -> bool:
        """Every role on one host."""

    @property
    def simulated(self) -> str | None:
        """"NxG" when the run is rehearsed on a simulated cluster."""

    def follow(self, recorded: Any) -> list[str]:
        """Changes since `recorded` a resume follows; `ConfigError` for one it cannot."""


@runtime_checkable
class Planned(Protocol):
    """A config that makes its run's plan (the built-in flows' configs)."""

    def run_plan(self, cluster: Any = None) -> Plan:
        """The plan on `cluster` (default: the Ray cluster joined, else this machine)."""


def plan_of(config: FlowConfig) -> Plan | None:
    """`config`'s plan on the cluster at hand, or None for a config that makes none."""
    return config.run_plan() if isinstance(config, Planned) else None


def resolve(requested: str, address: str | None, config: FlowConfig,
            plan: Plan | None = None) -> tuple[str, str]:
    """(executor, why): the one `requested` names, or the one `auto` picks: Ray for a named
    cluster and for flows without a plan, else what the plan (made now unless given) needs."""
    if requested != "auto":
        return requested, ""
    if address:
        return "ray", NAMED
    plan = plan or plan_of(config)
    if plan is None:
        return "ray", UNPLANNED
    return plan.executor, plan.executor_reason


def settle(state: RunState, config: FlowConfig) -> tuple[Plan | None, dict[str, Any]]:
    """The plan this drive follows, made on the cluster now joined, and the run.json fields
    recording it (at a run's first drive; on a resume compared with the recorded one first:
    what changed and the checkpoints can follow is said on stderr; anything else is refused
    in one line)."""
    plan = plan_of(config)
    if plan is None:
        return None, {}
    check_store(plan, state.store)
    run_id, recorded = state.run_id, state.meta.get("plan")
    if recorded is not None:
        for line in _follow(plan, recorded, run_id):
            print(f"note: run {run_id} resumes on another plan: {line}", file=sys.stderr)
    encoded = codec.encode(plan)
    marked = _simulated(plan, state.meta)
    return plan, ({"plan": encoded, **marked} if encoded != recorded or marked else {})


def _simulated(plan: Plan, meta: dict[str, Any]) -> dict[str, Any]:
    """run.json's `simulated` record for a run driven on a simulated cluster (its cluster;
    the CLI adds what each process saw): kept once written, the run was rehearsed."""
    if plan.simulated is None or (meta.get("simulated") or {}).get("cluster") == plan.simulated:
        return {}
    return {"simulated": {"cluster": plan.simulated}}


def check_store(plan: Plan | None, store: Store) -> None:
    """Refuse a store the plan's nodes cannot share (a local path on a multi-node run)."""
    check = getattr(plan, "check_store", None)
    if check is not None:
        check(store)


def _follow(plan: Plan, recorded: Any, run_id: str) -> list[str]:
    where = runs.run_json(run_id)
    old = codec.decode(recorded, where)
    if type(old) is not type(plan):
        raise FlowError(f"{where}: 'plan' holds a {type(old).__name__}; expected a "
                        f"{type(plan).__name__}")
    try:
        return plan.follow(old)
    except ConfigError as exc:
        raise ConfigError(f"resume of run {run_id!r} refused: {exc}") from None


def current(config: Planned) -> Any:
    """The running flow's plan (settled by its driver), else `config`'s own (a flow called
    outside a run)."""
    driver = current_driver()
    plan = driver.plan if driver is not None else None
    return plan if plan is not None else config.run_plan()
