"""The offline training steps as journalled tasks, and the calls the offline flows spell
their pseudo-code with (each flow file is one algorithm: `sft.py`, `dpo.py`, ...).

Keys: `prepare` (cached across runs: local files are fingerprinted, so edits invalidate),
`plan`, `reference` (DPO, KTO; cached), `teacher-NNNN` (distillation, on the teacher host),
`train-NNNN` (one `save_steps` chunk on the policy host: checkpoint, metrics, consumed
examples), `export`.
"""

from __future__ import annotations

import functools

from alignflow.artifacts.scope import current_scope
from alignflow.flows.control import planning
from alignflow.flows.engine import expect, task
from alignflow.flows.lazyref import LazyRef
from alignflow.flows.offline.config import DistillConfig, OfflineConfig
from alignflow.flows.ray.workers import plan_group
from alignflow.tasks.offline.config import POLICY, TEACHER
from alignflow.tasks.offline.fingerprint import fingerprint
from alignflow.tasks.offline.host_spec import OfflineHostSpec
from alignflow.tasks.offline.kinds import objective
from alignflow.tasks.offline.records import OfflineData, ReferenceOutput, TeacherOutput
from alignflow.tasks.trainers.plan import Plan

# The bodies and hosts run in workers; the driver names them (`flows/lazyref.py`).
prepare_examples = task(version=1, cache=True)("alignflow.tasks.offline.prepare:prepare")
reference_logprobs = task(version=1, cache=True)("alignflow.tasks.offline.reference:reference")
teacher_logits = task(version=1)("alignflow.tasks.offline.teacher:teacher_logits")
train_steps = task(version=1)("alignflow.tasks.offline.train:train")
export_model = task(version=1)("alignflow.tasks.steps.export:export_model")
OFFLINE_HOST = LazyRef("alignflow.tasks.offline.host:OfflineHost")
TEACHER_HOST = LazyRef("alignflow.tasks.offline.host:TeacherHost")


@task(version=1)
def make_plan(rows: int, batch_size: int, epochs: int, save_steps: int, drop_last: bool,
              max_steps: int | None = None, first_step: int = 0) -> Plan:
    """The step schedule, fixed once per run; its order seed is this task's seed."""
    return Plan.for_epochs(current_scope().seed, rows, batch_size, epochs,
                           save_steps=save_steps, drop_last=drop_last, max_steps=max_steps,
                           first_step=first_step)


def prepare_data(cfg: OfflineConfig) -> OfflineData:
    model = cfg.model.model_name_or_path
    return prepare_examples.options(key="prepare")(
        cfg.prepare_spec, cfg.KIND, model, fingerprint(cfg.data.dataset, cfg.eval.dataset, model))


def plan_steps(cfg: OfflineConfig, data: OfflineData) -> Plan:
    cfg.plan(0, data.train_rows)  # a batch larger than the data fails here, in one line
    plan = make_plan.options(key="plan")(
        data.train_rows, cfg.train.batch_size, cfg.train.max_epochs,
        cfg.ckpt.save_steps, True, cfg.train.max_steps)
    expect(plan.chunks)  # the train-NNNN tasks
    return plan


def reference_of(cfg: OfflineConfig, data: OfflineData) -> ReferenceOutput:
    return reference_logprobs.options(key="reference")(
        data, cfg.reference, cfg.train.micro_batch_size, cfg.ds.param_dtype,
        cfg.num_threads, fingerprint(cfg.reference))


def declare_policy(cfg: OfflineConfig, plan: Plan) -> None:
    """The hosts of the run's plan: the one that trains (its schedule `plan.total_steps`
    long), and the teacher's, for distillation."""
    run_plan = planning.current(cfg)
    run_plan.check_fits()
    policy = run_plan.host(POLICY)
    spec = OfflineHostSpec(plan=policy.for_steps(plan.total_steps),
                           pretrain=cfg.model.model_name_or_path,
                           value_head=objective(cfg.KIND).value_head,
                           num_threads=cfg.num_threads, keep_checkpoints=cfg.ckpt.max_num)
    plan_group(policy, functools.partial(OFFLINE_HOST, spec))
    if isinstance(cfg, DistillConfig) and TEACHER in (h.name for h in run_plan.hosts):
        plan_group(run_plan.host(TEACHER), functools.partial(
            TEACHER_HOST, cfg.teacher.model_name_or_path, dtype=cfg.ds.param_dtype,
            num_threads=cfg.num_threads))


def teacher_chunk(cfg: OfflineConfig, data: OfflineData, plan: Plan, chunk: int) -> TeacherOutput:
    return teacher_logits.options(worker=TEACHER, key=f"teacher-{chunk:04d}")(
        data, chunk, plan, cfg.train_spec())


def train_chunk(cfg: OfflineConfig, data: OfflineData, plan: Plan, chunk: int, *,
                ref: ReferenceOutput | None = None, logits: TeacherOutput | None = None) -> float:
    """Chunk `chunk`'s optimizer steps on the policy host; returns their mean loss."""
    out = train_steps.options(worker=POLICY, key=f"train-{chunk:04d}")(
        data, ref, logits, chunk, plan, cfg.train_spec())
    if cfg.ckpt.save_hf and chunk + 1 < plan.chunks:  # the last one is the final export
        export_model.options(worker=POLICY, key=f"export-{chunk:04d}")(f"model-step-{out.step}")
    return out.metrics.get("loss")


def finish(plan: Plan, losses: list[float]) -> dict:
    """Export the trained model as an HF folder; the flow's output."""
    final = export_model.options(worker=POLICY, key="export")("model")
    return {"steps": plan.total_steps, "loss": losses, "model": final["path"]}


def train_offline(cfg: OfflineConfig, *, reference: bool = False,
                  teacher: bool = False) -> dict:
    """The loop every offline flow runs: prepare → plan → reference log-probs (DPO, KTO)
    → the policy host → per chunk: the teacher's logits (distillation), train → export."""
    data = prepare_data(cfg)
    plan = plan_steps(cfg, data)
    ref = reference_of(cfg, data) if reference else None
    declare_policy(cfg, plan)
    losses = []
    for c in range(plan.chunks):
        logits = teacher_chunk(cfg, data, plan, c) if teacher else None
        losses.append(train_chunk(cfg, data, plan, c, ref=ref, logits=logits))
    return finish(plan, losses)
