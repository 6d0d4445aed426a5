"""DPO / IPO / cDPO as a durable flow (see `offline_steps`)."""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline_config import DPOConfig
from alignflow.flows.offline_steps import train_offline


@flow(name="dpo")
def dpo(cfg: DPOConfig) -> dict:
    return train_offline(cfg)
