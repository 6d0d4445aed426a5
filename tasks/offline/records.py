"""The small JSON records offline steps return to the flow (the data is in the store)."""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.artifacts.journal import journal_record
from alignflow.artifacts.parquet_io import ArtifactRef


@journal_record
@dataclass(frozen=True)
class OfflineData:
    """The prepared examples (`offline_examples` files) and their counts."""

    refs: tuple[ArtifactRef, ...]
    kind: str
    train_rows: int
    eval_rows: int
    metrics: dict[str, float] = field(default_factory=dict)
    round: int | None = None  # a loop's round the examples were selected in


@journal_record
@dataclass(frozen=True)
class ReferenceOutput:
    """Reference log-probs of every example (`offline_reference` files)."""

    refs: tuple[ArtifactRef, ...]
    rows: int


@journal_record
@dataclass(frozen=True)
class TeacherOutput:
    """Teacher logits of one chunk's examples: `<checkpoint>/logits.safetensors`. Named
    `checkpoint` so the manifest lists the folder (gc keeps it; the teacher host's
    `restore` ignores it)."""

    checkpoint: str
    rows: int

    @property
    def path(self) -> str:
        return f"{self.checkpoint}/logits.safetensors"


@journal_record
@dataclass(frozen=True)
class TrainOutput:
    """One chunk of optimizer steps: its checkpoint, last step and mean metrics."""

    checkpoint: str
    step: int
    metrics: dict[str, float] = field(default_factory=dict)
