"""Knowledge distillation (teacher on its own worker) as a durable flow (see `offline_steps`)."""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline_config import DistillConfig
from alignflow.flows.offline_steps import train_offline


@flow(name="distill")
def distill(cfg: DistillConfig) -> dict:
    return train_offline(cfg)
