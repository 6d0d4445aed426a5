"""Supervised fine-tuning and conditional SFT.

    data ← prepare(dataset)          token ids and loss masks (cached across runs)
    plan ← plan(train rows)          the seeded order of every optimizer step
    for each chunk of save_steps optimizer steps:
        train-NNNN ← train(chunk)    checkpoint, metrics, sft_samples
    export the final model as an HF folder

CSFT is the same loop over examples whose prompt carries the row's score.
"""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline.config import CSFTConfig, SFTConfig
from alignflow.flows.offline.steps import train_offline


@flow(name="sft")
def sft(cfg: SFTConfig) -> dict:
    return train_offline(cfg)


@flow(name="csft")
def csft(cfg: CSFTConfig) -> dict:
    return train_offline(cfg)
