"""What an offline host is built from: a record the driver fills in and the host's worker
reads, apart from `host.py` (torch, transformers) so the driver only names the host."""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.tasks.offline.config import TRAINED
from alignflow.tasks.plan.hosts import HostPlan, TrainerPlan


@dataclass(frozen=True, kw_only=True)
class OfflineHostSpec:
    """The host's plan (its trainer: backend and settings, the run's length filled in) and
    the model it trains."""

    plan: HostPlan
    pretrain: str
    value_head: bool  # a reward model: a scalar head on the backbone
    num_threads: int | None = None
    keep_checkpoints: int = 2

    @property
    def trainer(self) -> TrainerPlan:
        found = self.plan.trainer(TRAINED)
        assert found is not None, f"host {self.plan.name} trains no {TRAINED}"
        return found
