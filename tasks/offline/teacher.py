"""Distillation teacher logits for one train chunk. Reads: `offline_examples`. Writes:
`runs/<run>/teacher/<task>/logits.safetensors` (logits per consumed example, keyed
`p<position>`).

Runs on the teacher host (its own worker), before the chunk's `train` task reads it.
"""

from __future__ import annotations

import torch
from safetensors.torch import save as save_tensors

from alignflow.artifacts.scope import current_scope
from alignflow.tasks.offline.batches import host_examples, lm_batch
from alignflow.tasks.offline.config import TrainSpec
from alignflow.tasks.offline.records import OfflineData, TeacherOutput
from alignflow.tasks.steps.host_api import Teacher
from alignflow.tasks.trainers.plan import Plan


@torch.no_grad()
def teacher_logits(host: Teacher, data: OfflineData, chunk: int, plan: Plan,
                   spec: TrainSpec) -> TeacherOutput:
    """Teacher logits (T-1, V) for every train example the chunk's steps consume."""
    scope = current_scope()
    ex = host_examples(host, scope.store, data)["train"]
    positions = sorted({i for s in plan.chunk_steps(chunk)
                        for i in plan.indices(s, spec.train_batch_size)})
    tensors: dict[str, torch.Tensor] = {}
    micro = spec.micro_train_batch_size
    for lo in range(0, len(positions), micro):
        rows = positions[lo : lo + micro]
        ids = [ex["input_ids"][i] for i in rows]
        input_ids, attention, _ = lm_batch(ids, [[1] * len(s) for s in ids], host.pad_id)
        logits = host.model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits
        for row, i in enumerate(rows):
            tensors[f"p{i}"] = logits[row, : len(ids[row]) - 1].float().contiguous()
    out = TeacherOutput(f"runs/{scope.run_id}/teacher/{scope.task_key}", len(positions))
    scope.store.write_bytes(out.path, save_tensors(tensors))
    return out
