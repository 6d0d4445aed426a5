"""Where each generation engine of a plan sits: on GPUs of its own, or on ranks (GPUs) of
the host it shares — what `--dry-run` lists and the placement parity test compares with
OpenRLHF's launcher (`tests/fast/openrlhf_layouts.py`).

A host's rank r runs on node r // workers_per_node (one bundle per node, ranks in order). A
hybrid engine i of tensor parallel t in actors uses ranks [i·t, (i+1)·t) of the host's GPUs,
as OpenRLHF hands engine i the bundles i·t .. i·t + t − 1 of the shared placement group
(bundles sorted by node: `get_bundle_indices`).
"""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.tasks.plan.hosts import HostPlan
from alignflow.tasks.plan.records import RunPlan


@dataclass(frozen=True)
class EngineSite:
    """One engine: the host whose GPUs it shares and the ranks it sits on (host None: GPUs
    of its own, `gpus` of them), and its node where known."""

    index: int
    kind: str
    host: str | None
    ranks: tuple[int, ...] = ()
    node: int | None = None
    gpus: float = 0.0

    def describe(self) -> str:
        if self.host is None:
            return f"{self.index}: {self.gpus:g} GPU(s) of its own"
        ranks = f"rank {self.ranks[0]}" if len(self.ranks) == 1 else \
            f"ranks {self.ranks[0]}-{self.ranks[-1]}"
        return f"{self.index}: host {self.host} {ranks} (node {self.node})"


def engine_sites(plan: RunPlan) -> tuple[EngineSite, ...]:
    """Every engine that generates the run's batches, in order."""
    e = plan.engines
    if e is not None and e.hybrid:
        host = plan.hosts[0]
        return tuple(_on(host, i, "vllm", range(i * e.tensor_parallel,
                                                 (i + 1) * e.tensor_parallel))
                     for i in range(e.count))
    if e is not None:
        return tuple(EngineSite(index=i, kind="vllm", host=None, gpus=e.gpus_each)
                     for i in range(e.count))
    found = next((h for h in reversed(plan.groups) if h.engine is not None), None)
    if found is None or found.engine is None:
        return ()
    ranks = range(found.workers) if found.engine.per_rank else range(1)
    return tuple(_on(found, r, found.engine.kind, (r,)) for r in ranks)


def _on(host: HostPlan, index: int, kind: str, ranks: range | tuple[int, ...]) -> EngineSite:
    ranks = tuple(ranks)
    return EngineSite(index=index, kind=kind, host=host.name, ranks=ranks,
                      node=ranks[0] // host.workers_per_node,
                      gpus=len(ranks) * host.gpus_per_worker)


def sites_line(plan: RunPlan) -> str | None:
    """The dry run's line naming the engine count and where each sits (None: no engine)."""
    sites = engine_sites(plan)
    if not sites:
        return None
    return (f"  generation engines: {len(sites)} ({sites[0].kind}) — "
            + "; ".join(s.describe() for s in sites))
