"""KTO as a durable flow (see `offline_steps`)."""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline_config import KTOConfig
from alignflow.flows.offline_steps import train_offline


@flow(name="kto")
def kto(cfg: KTOConfig) -> dict:
    return train_offline(cfg)
