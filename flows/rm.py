"""Reward-model training as a durable flow (see `offline_steps`)."""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline_config import RMConfig
from alignflow.flows.offline_steps import train_offline


@flow(name="rm")
def rm(cfg: RMConfig) -> dict:
    return train_offline(cfg)
