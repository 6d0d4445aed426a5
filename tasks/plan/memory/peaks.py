"""One GPU's bytes by phase, from its parts (`parts.py`), and its peak.

In a phase every part on the GPU holds what it always holds (`resident`, unless it is
away then), and adds that phase's extras: in `learn` and `forward` one part at a time works (the roles of a host
train and score one after another), so the largest part's extras count; in `generate`,
`sync` and `save` every part's. Each process on the GPU adds its CUDA context: 0.5 GiB, an
estimate (the CUDA runtime's context and kernel images live outside torch's allocator,
which `max_memory_allocated` and alignflow's recorded peaks do not count; vLLM's profiler
counts them as its "non-torch" memory, `vllm/utils/mem_utils.py`; a few hundred MiB on
A100/H100 with CUDA's lazy module loading). alignflow runs a host's roles and its in-process
engine in one process; OpenRLHF each model and each engine rank in its own.
"""

from __future__ import annotations

from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.memory.engine import EngineBytes
from alignflow.tasks.plan.memory.layout import GpuSet
from alignflow.tasks.plan.memory.parts import Part, engine_part, parts
from alignflow.tasks.plan.memory.report import GIB, PHASES, GpuPeak
from alignflow.tasks.plan.memory.states import Items
from alignflow.tasks.plan.records import RunPlan

CONTEXT = GIB // 2
ONE_AT_A_TIME = ("learn", "forward")


def phase_items(parts: list[Part], processes: int) -> dict[str, Items]:
    """Each phase's items on one GPU."""
    out = {}
    for phase in PHASES:
        here = [p for p in parts if phase not in p.away]
        items: Items = {"CUDA context": processes * CONTEXT}
        for part in here:
            items |= part.resident
        extras = [p.extra.get(phase, {}) for p in parts]  # an away part's too (woken)
        if phase in ONE_AT_A_TIME:
            extras = [max(extras, key=lambda e: sum(e.values()), default={})]
        for extra in extras:
            for name, value in extra.items():
                items[name] = items.get(name, 0) + value
        out[phase] = {k: v for k, v in items.items() if v}
    return out


def peak_of(name: str, count: int, holds: tuple[str, ...],
            phases: dict[str, Items]) -> GpuPeak:
    """The GPU's peak: the phase with the largest total, and the item that set it: of that
    phase's items, the one it holds the most more of than the phase holding the least of it
    (what the phase adds: a sync's staging, a step's activations), else the largest."""
    totals = {p: sum(items.values()) for p, items in phases.items()}
    phase = max(PHASES, key=lambda p: totals[p])
    items = sorted(phases[phase].items(), key=lambda kv: -kv[1])

    def added(kv: tuple[str, float]) -> tuple[float, float]:
        return kv[1] - min(phases[p].get(kv[0], 0) for p in PHASES), kv[1]
    return GpuPeak(gpus=name, count=count, holds=holds, peak=int(totals[phase]), phase=phase,
                   item=max(items, key=added)[0],
                   phases=tuple((p, int(totals[p])) for p in PHASES),
                   items=tuple((k, int(v)) for k, v in items))


def gpu_peak(gpus: GpuSet, plan: RunPlan, ask: MemoryAsk,
             total: float) -> tuple[GpuPeak, EngineBytes | None]:
    """One GPU of `gpus`: its peak, and its engine's bytes (None: no engine)."""
    held = parts(gpus, plan, ask)
    found = engine_part(gpus, plan, ask, total)
    if found is not None:
        held.append(found[0])
    separate = 1 if gpus.engine == "vllm actor" else 0
    procs = (len(held) if ask.frozen == "openrlhf" else len(gpus.hosts) + separate) or 1
    phases = phase_items(held, procs)
    return peak_of(gpus.name, gpus.count, tuple(p.who for p in held), phases), \
        found[1] if found else None
