"""Supervised fine-tuning and conditional SFT as durable flows (see `offline_steps`)."""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline_config import CSFTConfig, SFTConfig
from alignflow.flows.offline_steps import train_offline


@flow(name="sft")
def sft(cfg: SFTConfig) -> dict:
    return train_offline(cfg)


@flow(name="csft")
def csft(cfg: CSFTConfig) -> dict:
    return train_offline(cfg)
