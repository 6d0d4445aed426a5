"""Process reward model: CE on the reward tokens (`+`/`-`) at each step's placeholder.

    data ← prepare(dataset)          token ids, per-step labels (cached across runs)
    plan ← plan(train rows)
    for each chunk of save_steps optimizer steps:
        train-NNNN ← train(chunk)    checkpoint, metrics, sft_samples
    export the final model as an HF folder
"""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline.config import PRMConfig
from alignflow.flows.offline.steps import train_offline


@flow(name="prm")
def prm(cfg: PRMConfig) -> dict:
    return train_offline(cfg)
