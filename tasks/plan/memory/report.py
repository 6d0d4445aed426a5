"""The memory plan as recorded in run.json and shown by `--dry-run`: each distinct GPU's
peak, with the phase and the item that set it, and a verdict against the GPU's memory.
Journal records (plain JSON in run.json)."""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.artifacts.journal import journal_record

GIB = 1 << 30
PHASES = ("generate", "forward", "learn", "sync", "save")
PHASES_SHOWN = "GiB: generate, reference/reward forward, learn, weight sync, save"
PHASE_NAMES = {"generate": "generate", "forward": "reference/reward forward",
               "learn": "learn", "sync": "weight sync", "save": "save"}


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


@journal_record
@dataclass(frozen=True, kw_only=True)
class GpuPeak:
    """`count` GPUs alike (`gpus` names them; `holds` what sits on each): the peak bytes
    on each, the phase and the item that set it (the largest item of that phase), every
    phase's total and the peak phase's items, largest first."""

    gpus: str
    count: int
    holds: tuple[str, ...]
    peak: int
    phase: str
    item: str
    phases: tuple[tuple[str, int], ...]
    items: tuple[tuple[str, int], ...]

    def line(self) -> str:
        return (f"{self.gpus} ({self.count} GPU{'s' if self.count > 1 else ''}): peak "
                f"{gib(self.peak)} in {PHASE_NAMES[self.phase]}, largest item "
                f"{self.item} {gib(dict(self.items)[self.item])}")


@journal_record
@dataclass(frozen=True, kw_only=True)
class MemoryPlan:
    """Every GPU's peak for GPUs of `gpu_memory` bytes (`assumed`: not given, 80 GiB);
    `frozen`: how reference/reward models were counted (alignflow: replicas, as this
    version holds them; openrlhf: as OpenRLHF does); `problems`: one line each, the first
    refuses the plan; `notes`: said beside the table."""

    gpu_memory: int
    assumed: bool
    frozen: str
    gpus: tuple[GpuPeak, ...]
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()  # "role: name" whose size could not be read (no refusal)

    def problem(self) -> str | None:
        """The first problem, where every model's size is known: with one unknown the
        peaks are a lower bound made of what was read, and nothing is refused on them."""
        return self.problems[0] if self.problems and not self.unknown else None

    def peak_of(self, role: str) -> int | None:
        """The planned peak bytes of the GPUs holding `role` (the largest such GPU);
        None where no GPU holds it or a model's size is unknown."""
        found = [g.peak for g in self.gpus if any(h.split(" ")[0] == role for h in g.holds)]
        return max(found) if found and not self.unknown else None

    def table(self) -> list[str]:
        """The dry run's lines: a head, one row per distinct GPU, the notes."""
        size = f"{self.gpu_memory / GIB:g} GiB" + (
            " assumed (--gpu-memory SIZE to set it)" if self.assumed else "")
        if self.unknown:
            lines = [f"memory: unknown (the size of {', '.join(self.unknown)} could not be "
                     f"read: nothing refused on memory); counted without it, GPUs of {size}"]
            if not self.gpus:
                return lines + [f"note: {n}" for n in self.notes]
        else:
            lines = [f"memory: peak per GPU by phase ({PHASES_SHOWN}), GPUs of {size}"]
        head = ("GPUs", "holds", *PHASES, "peak: phase, item")
        rows = [head] + [(f"{g.gpus} ×{g.count}", ", ".join(g.holds),
                          *(f"{dict(g.phases).get(p, 0) / GIB:.1f}" for p in PHASES),
                          f"{gib(g.peak)}: {g.phase}, {g.item}") for g in self.gpus]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                  for r in rows]
        return lines + [f"note: {n}" for n in self.notes]

