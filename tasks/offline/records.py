"""The small JSON records offline steps return to the flow (the data is in the store)."""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.artifacts.parquet_io import ArtifactRef


@dataclass(frozen=True)
class OfflineData:
    """The prepared examples (`offline_examples` files) and their counts."""

    refs: tuple[ArtifactRef, ...]
    kind: str
    train_rows: int
    eval_rows: int
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ReferenceOutput:
    """Reference log-probs of every example (`offline_reference` files)."""

    refs: tuple[ArtifactRef, ...]
    rows: int


@dataclass(frozen=True)
class TeacherOutput:
    """Teacher logits of one chunk's examples: a safetensors file in the store."""

    path: str
    rows: int


@dataclass(frozen=True)
class TrainOutput:
    """One chunk of optimizer steps: its checkpoint, last step and mean metrics."""

    checkpoint: str
    step: int
    metrics: dict[str, float] = field(default_factory=dict)
