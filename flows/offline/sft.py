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
from alignflow.flows.offline.config import CSFTConfig, OfflineConfig, SFTConfig
from alignflow.flows.offline.steps import (
    declare_policy,
    finish,
    plan_steps,
    prepare_data,
    train_chunk,
)


def _supervised(cfg: OfflineConfig) -> dict:
    data = prepare_data(cfg)
    plan = plan_steps(cfg, data)
    declare_policy(cfg, plan)
    losses = [train_chunk(cfg, data, plan, c) for c in range(plan.chunks)]
    return finish(plan, losses)


@flow(name="sft")
def sft(cfg: SFTConfig) -> dict:
    return _supervised(cfg)


@flow(name="csft")
def csft(cfg: CSFTConfig) -> dict:
    return _supervised(cfg)
