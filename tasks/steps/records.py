"""The small JSON records RL steps return to the flow (the data itself is in the store)."""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.artifacts.journal import journal_record
from alignflow.artifacts.parquet_io import ArtifactRef


@journal_record
@dataclass(frozen=True)
class StepOutput:
    """What a step committed (`refs`) and its scalar metrics."""

    refs: tuple[ArtifactRef, ...]
    rows: int
    metrics: dict[str, float] = field(default_factory=dict)


@journal_record
@dataclass(frozen=True)
class LearnState:
    """State carried from one learn step to the next through the journal (not the host):
    the KL coefficient (adaptive control) and the running reward moments."""

    kl_coef: float
    reward_moments: dict[str, float] = field(default_factory=dict)


@journal_record
@dataclass(frozen=True)
class LearnOutput:
    """A learn step: its checkpoint folder, the policy version it produced, its metrics."""

    checkpoint: str
    policy_version: int
    metrics: dict[str, float] = field(default_factory=dict)
    state: LearnState | None = None
    advantages: tuple[ArtifactRef, ...] = ()
