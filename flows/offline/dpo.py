"""DPO / IPO / cDPO against reference log-probs computed once.

    data      ← prepare(dataset)            prompt, chosen, rejected ids (cached across runs)
    plan      ← plan(train rows)
    reference ← reference log-probs(data)   the reference model, once (cached across runs)
    for each chunk of save_steps optimizer steps:
        train-NNNN ← train(chunk)           checkpoint, metrics, preferences (rewards, loss)
    export the final model as an HF folder
"""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline.config import DPOConfig
from alignflow.flows.offline.steps import train_offline


@flow(name="dpo")
def dpo(cfg: DPOConfig) -> dict:
    return train_offline(cfg, reference=True)
