"""KTO: chosen responses are desirable, rejected ones undesirable; the KL term uses each
prompt with another example's response (fixed, so its reference log-probs are cached).

    data      ← prepare(dataset)            (cached across runs)
    plan      ← plan(train rows)
    reference ← reference log-probs(data)   chosen, rejected and the KL sample (cached)
    for each chunk of save_steps optimizer steps:
        train-NNNN ← train(chunk)           checkpoint, metrics, preferences
    export the final model as an HF folder
"""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline.config import KTOConfig
from alignflow.flows.offline.steps import train_offline


@flow(name="kto")
def kto(cfg: KTOConfig) -> dict:
    return train_offline(cfg, reference=True)
