"""The small records a campaign's tasks journal (the data itself is in tables)."""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.artifacts.journal import journal_record


@journal_record
@dataclass(frozen=True)
class Due:
    """When round `round` is due (its identity), and how many due times were skipped."""

    round: int
    due: float
    skipped: int = 0


@journal_record
@dataclass(frozen=True)
class InputFile:
    path: str  # URL in the source (a local absolute path or s3://...)
    size: int
    stamp: str


@journal_record
@dataclass(frozen=True)
class Inputs:
    """The new files one round consumed (in name order)."""

    files: tuple[InputFile, ...] = ()


@journal_record
@dataclass(frozen=True)
class Policy:
    """A campaign policy: its version (0 = the initial one), where its model folder is
    (a model name, a local folder, or a store path), and its gate score."""

    version: int
    path: str
    score: float | None = None
    round: int | None = None  # the round that produced it (None: initial)


@journal_record
@dataclass(frozen=True)
class RoundRun:
    """A round's run: its id and the model folder it exported (store-relative)."""

    run_id: str
    model: str


@journal_record
@dataclass(frozen=True)
class Score:
    """A gate evaluation: the metric's value and all eval metrics."""

    value: float
    metrics: dict
    iteration: int

    def of(self, metric: str) -> float:
        """The eval's value of `metric`, by its step's name or its namespaced one
        (`rollout/reward_mean`); the gate's metric may have changed since."""
        from alignflow.artifacts.metric_names import canonical

        found = {canonical(k): v for k, v in self.metrics.items()}
        if canonical(metric) not in found:
            from alignflow.errors import FlowError

            raise FlowError(f"gate.metric={metric!r} is not a metric of eval {self.iteration}; "
                            f"expected one of {sorted(self.metrics)}")
        return float(found[canonical(metric)])
