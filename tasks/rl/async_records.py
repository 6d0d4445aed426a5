"""JSON records of the asynchronous pipeline: which weights a generation task samples with,
and what a partial-rollout segment committed (the data itself is in the store)."""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.artifacts.journal import journal_record
from alignflow.artifacts.parquet_io import ArtifactRef
from alignflow.tasks.steps.records import StepOutput


@journal_record
@dataclass(frozen=True)
class PolicyRef:
    """Policy version `version`, saved in `checkpoint` (None: the pretrained weights)."""

    version: int
    checkpoint: str | None = None


@journal_record
@dataclass(frozen=True)
class SegmentOutput:
    """One segment of a partial rollout: the tokens it added (`refs`, table
    rollout_segments), the version that sampled them, and — once every response has
    finished — the assembled batch (`rollouts`)."""

    refs: tuple[ArtifactRef, ...]
    segment: int
    policy_version: int
    unfinished: int
    rollouts: StepOutput | None = None
    metrics: dict[str, float] = field(default_factory=dict)


@journal_record
@dataclass(frozen=True)
class EpisodeOutput:
    """The batch (`rollouts`), its rewards (`scores`) and its turns (`turns`)."""

    rollouts: StepOutput
    scores: StepOutput
    turns: StepOutput
