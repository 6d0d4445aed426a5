"""On-policy distillation's teacher step. Reads: rollouts. Commits: rollout_teacher.

The student samples; the teacher scores the student's own tokens: log π_T(y_t | x, y_<t) for
every response token, at the sampling temperature, on the host of the `ref` role (placed
and sharded as the reference: `ModelHost.teacher`). The learn step reads the table where a
reference's log-probs would go, so the per-token KL it computes (k1: log π_S − log π_T, the
reverse KL's per-token estimate on the student's samples) is the teacher's, and the
`on_policy_distill` estimator (`tasks/advantages/distill.py`) turns it into the advantage.
Per token in SQL: `SELECT teacher_logprobs FROM rollout_teacher`.
"""

from __future__ import annotations

import pyarrow as pa
import torch

from alignflow.artifacts import schemas
from alignflow.artifacts.schemas import TableSchema
from alignflow.tasks.rl.reference import _inputs, _keyed, token_logprobs
from alignflow.tasks.steps import gpu_memory
from alignflow.tasks.steps.host_api import RLHost
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.tables import REFERENCE

TEACHER = schemas.register(TableSchema("rollout_teacher", "1.0", pa.schema([
    *[f for f in REFERENCE.arrow_schema if f.name != "ref_logprobs"],
    pa.field("teacher_logprobs", pa.list_(pa.float32())),
])))


@torch.no_grad()
def teacher_logprobs(host: RLHost, rollouts: StepOutput, iteration: int, teacher: str,
                     micro_batch: int = 8, temperature: float = 1.0,
                     max_tokens: int | None = None) -> StepOutput:
    """log π_teacher(response token) for every response token of the student's samples."""
    scope, table, prompts, responses = _inputs(rollouts)
    gpu_memory.start(host)
    out = token_logprobs(host.teacher(teacher), prompts, responses,
                         pad_id=host.tokenizer.pad_token_id, micro_batch=micro_batch,
                         temperature=temperature, max_tokens=max_tokens)
    ref = scope.write(TEACHER, _keyed(table, scope, "teacher_logprobs", out),
                      partition={"iter": iteration})
    return StepOutput((ref,), table.num_rows, gpu_memory.record(scope, host, "ref", iteration))
