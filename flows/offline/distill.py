"""Knowledge distillation: α·CE + (1−α)·KL(teacher‖student), the teacher on its own host.

    data ← prepare(dataset)             (cached across runs)
    plan ← plan(train rows)
    for each chunk of save_steps optimizer steps:
        teacher-NNNN ← teacher logits(the chunk's examples)   on the teacher host
        train-NNNN   ← train(chunk, teacher logits)           checkpoint, metrics, sft_samples
    export the final model as an HF folder
"""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.offline.config import DistillConfig
from alignflow.flows.offline.steps import train_offline


@flow(name="distill")
def distill(cfg: DistillConfig) -> dict:
    return train_offline(cfg, teacher=True)
