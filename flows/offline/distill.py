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
from alignflow.flows.offline.steps import (
    declare_policy,
    finish,
    plan_steps,
    prepare_data,
    teacher_chunk,
    train_chunk,
)


@flow(name="distill")
def distill(cfg: DistillConfig) -> dict:
    data = prepare_data(cfg)
    plan = plan_steps(cfg, data)
    declare_policy(cfg, plan)
    losses = []
    for c in range(plan.chunks):
        logits = teacher_chunk(cfg, data, plan, c)
        losses.append(train_chunk(cfg, data, plan, c, logits=logits))
    return finish(plan, losses)
