"""Reward model: a scalar head on the backbone, trained on preference pairs.

    data ← prepare(dataset)          prompt, chosen and rejected ids (cached across runs)
    plan ← plan(train rows)
    for each chunk of save_steps optimizer steps:
        train-NNNN ← train(chunk)    checkpoint, metrics, preferences (scores, loss)
    export an AutoModelForSequenceClassification folder (RL flows take it as a reward source)
"""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline.config import RMConfig
from alignflow.flows.offline.steps import train_offline


@flow(name="rm")
def rm(cfg: RMConfig) -> dict:
    return train_offline(cfg)
