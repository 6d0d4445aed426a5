"""The plan as `alignflow run ... --dry-run` shows it: one row per worker group (host,
roles, workers, GPUs/CPUs per worker, trainer, engine, placement), then the vLLM engines
and how a weight sync reaches them."""

from __future__ import annotations

from alignflow.tasks.plan.hosts import HostPlan
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.plan.sites import sites_line

HEAD = ("host", "roles", "workers", "GPUs/CPUs per worker", "trainer", "engine", "placement")


def plan_table(plan: RunPlan, executor: str) -> list[str]:
    """The table's lines; `executor` is the one the run gets (inline: every host in this
    process)."""
    rows = [HEAD, *(_row(h, executor) for h in plan.groups)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEAD))]
    lines = [f"plan: {plan.cluster.describe()}; the run takes {plan.gpus:g} GPU(s)"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    e = plan.engines
    if e is not None:
        lines.append(f"  vLLM engines: {e.count} × tensor parallel {e.tensor_parallel} "
                     f"({e.gpus_each:g} GPU each) in Ray actors, placed once, driven from "
                     f"{e.host}; weights sent by {e.transport}")
    sync = sync_line(plan)
    where = sites_line(plan)
    return lines + [x for x in (sync, where) if x] + [f"note: {n}" for n in size_notes(plan)]


def sync_line(plan: RunPlan) -> str | None:
    """How a weight sync reaches the engine that trains' host generates with
    (`vllm_ipc.planned_mode`): in place in the trainer's process, by CUDA IPC handle where
    an engine shares its trainer ranks' GPUs from another process, else by the engines'
    transport."""
    found = next(((h, h.engine, h.engine.vllm) for h in plan.groups if h.engine is not None
                  and h.engine.kind == "vllm" and h.engine.vllm is not None), None)
    if found is None:
        trains = any(h.engine is not None and h.trainers for h in plan.groups)
        return ("  weight sync: in place (the HF engine runs in the trainer's process and "
                "copies each tensor into its model)") if trains else None
    from alignflow.tasks.engines.vllm.ipc import planned_mode

    host, engine, vllm = found
    e = plan.engines
    mode, why = planned_mode(in_host=engine.in_host, ranks=host.workers,
                             tensor_parallel_size=vllm.tensor_parallel_size,
                             hybrid=bool(e is not None and e.hybrid),
                             transport=e.transport if e is not None else "ray")
    return f"  weight sync: {mode} ({why})"


def size_notes(plan: RunPlan) -> list[str]:
    """A role colocated on a host of another layout than it asked for runs on every worker
    of the host (each worker holds all the host's roles). OpenRLHF's launcher
    (`cli/train_ppo_ray.py`) asserts a colocated reference the actor's size and a critic's
    reward the critic's, and gives a critic or reward model on the actor's placement group
    (colocate_all) the first bundles of it, one per worker it asked for."""
    out = []
    for host in plan.hosts:
        for role, nodes, per_node in host.beside:
            asked = nodes * per_node
            refused = role == "ref" or (role == "reward" and "critic" in host.roles
                                        and "actor" not in host.roles)
            theirs = ("OpenRLHF refuses a colocated " + role + " of another size (it asserts "
                      "the same num_nodes and num_gpus_per_node)") if refused else (
                f"OpenRLHF runs its {asked} worker(s) on the first {asked} of the shared GPUs")
            out.append(f"{role}.num_nodes × {role}.num_gpus_per_node = {nodes}×{per_node}: "
                       f"the {role} runs on all {host.nodes}×{host.workers_per_node} workers of "
                       f"host {host.name} (each holds all the host's roles); {theirs}")
    return out


def _row(host: HostPlan, executor: str) -> tuple[str, ...]:
    return (host.name, ", ".join(host.roles) or "(generator)",
            f"{host.nodes}×{host.workers_per_node}",
            f"{host.gpus_per_worker:g} / {host.cpus_per_worker:g}", _trainer(host),
            host.engine.describe() if host.engine else "-", _placement(host, executor))


def _trainer(host: HostPlan) -> str:
    if not host.trainers:
        return "-" if host.holds_model else "- (no model)"
    if len(host.trainers) == 1:
        return host.trainers[0].describe()
    return ", ".join(f"{t.role}: {t.describe()}" for t in host.trainers)


def _placement(host: HostPlan, executor: str) -> str:
    if executor == "inline":
        return "this process"
    return "Ray actor" if host.workers == 1 else f"placement group ({host.nodes} bundle(s))"


def fit_lines(plan: RunPlan) -> list[str]:
    """Whether the cluster holds the plan: `fits: ...` (and what runs it cannot place yet);
    a plan that does not fit is refused by `RunPlan.check_fits` instead."""
    lines = [f"fits: {plan.cluster.describe()}: the run takes {plan.gpus:g} of "
             f"{plan.cluster.gpus} GPU(s)"]
    if plan.engines is not None and plan.engines.hybrid:
        lines[0] += (f" (the vLLM engines' {plan.engines.gpus_used:g} within host "
                     f"{plan.hosts[0].name}'s)")
    gap = plan.unplaced()
    return lines + ([f"note: {gap}"] if gap else [])

