"""The small JSON records loop steps return to the flow (the rows are in the store)."""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.artifacts.journal import journal_record
from alignflow.artifacts.parquet_io import ArtifactRef


@journal_record
@dataclass(frozen=True)
class Selection:
    """A round's kept samples (`rows`: best-of-n samples or pairs) and the seed that orders
    them for training, shared by all the round's training chunks."""

    refs: tuple[ArtifactRef, ...]
    rows: int
    seed: int
    preferences: tuple[ArtifactRef, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
