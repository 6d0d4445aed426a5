"""The offline training steps as journalled tasks, and the training loop every offline flow
shares:

    data      ← prepare(dataset)                         cached across runs (local files
                                                          fingerprinted: edits invalidate)
    plan      ← plan(train rows)                          order seed, step schedule
    reference ← reference logprobs(data)   (DPO, KTO)     cached across runs
    for each chunk of save_steps optimizer steps:
        teacher ← teacher logits(chunk)    (distill, on the teacher host)
        train-NNNN ← train(chunk)          (on the policy host: checkpoint, metrics, samples)
    export the final model as an HF folder
"""

from __future__ import annotations

import functools

from alignflow.artifacts.scope import current_scope
from alignflow.flows.engine import task
from alignflow.flows.offline_config import OfflineConfig
from alignflow.flows.workers import worker_group
from alignflow.tasks.offline import export, prepare, reference, teacher, train
from alignflow.tasks.offline.config import Plan
from alignflow.tasks.offline.fingerprint import fingerprint
from alignflow.tasks.offline.host import OfflineHost, OfflineHostSpec, TeacherHost

POLICY, TEACHER = "policy", "teacher"

prepare_data = task(version=1, cache=True)(prepare.prepare)
reference_logprobs = task(version=1, cache=True)(reference.reference)
teacher_logits = task(version=1)(teacher.teacher_logits)
train_chunk = task(version=1)(train.train)
export_model = task(version=1)(export.export_model)


@task(version=1)
def make_plan(train_rows: int, steps_per_epoch: int, total_steps: int, save_steps: int) -> Plan:
    """The step schedule and the seed of the training order, fixed once per run."""
    return Plan(current_scope().seed, train_rows, steps_per_epoch, total_steps, save_steps)


def declare_hosts(cfg: OfflineConfig, total_steps: int) -> None:
    spec = OfflineHostSpec(kind=cfg.KIND, pretrain=cfg.model.pretrain,
                           trainer=cfg.optim.trainer(total_steps, cfg.model),
                           num_threads=cfg.num_threads, keep_checkpoints=cfg.keep_checkpoints)
    worker_group(POLICY, functools.partial(OfflineHost, spec))
    if cfg.KIND == "distill":
        worker_group(TEACHER, functools.partial(TeacherHost, cfg.model.teacher_model,
                                                dtype=cfg.model.dtype,
                                                num_threads=cfg.num_threads))


def train_offline(cfg: OfflineConfig) -> dict:
    """The body of every offline flow; returns steps, per-chunk mean loss and the model."""
    data = prepare_data.options(key="prepare")(
        cfg.data, cfg.KIND, cfg.model.pretrain,
        fingerprint(cfg.data.dataset, cfg.data.eval_dataset, cfg.model.pretrain))
    per_epoch, total = cfg.total_steps(data.train_rows)
    plan = make_plan.options(key="plan")(data.train_rows, per_epoch, total,
                                         cfg.chunk_size(total))
    ref = None
    if cfg.KIND in ("dpo", "kto"):
        ref = reference_logprobs.options(key="reference")(
            data, cfg.model.reference, cfg.optim.micro_train_batch_size, cfg.model.dtype,
            cfg.num_threads, fingerprint(cfg.model.reference))
    declare_hosts(cfg, total)
    spec, losses = cfg.train_spec(), []
    for chunk in range(plan.chunks):
        logits = None
        if cfg.KIND == "distill":
            logits = teacher_logits.options(worker=TEACHER, key=f"teacher-{chunk:04d}")(
                data, chunk, plan, spec)
        out = train_chunk.options(worker=POLICY, key=f"train-{chunk:04d}")(
            data, ref, logits, chunk, plan, spec)
        losses.append(out.metrics.get("loss"))
    final = export_model.options(worker=POLICY, key="export")()
    return {"steps": total, "loss": losses, "model": final["path"]}
