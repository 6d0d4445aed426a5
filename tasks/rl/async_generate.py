"""Generation on the generator worker of an asynchronous run. Reads: prompts. Commits:
rollouts (and `metrics` for the batches the staleness bound dropped or regenerated).

A batch is sampled with the policy its task names (`PolicyRef`), whatever the worker held
before, so the batch's versions are a function of the schedule, not of timing.
"""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts.schemas import ROLLOUTS
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.rl.async_records import PolicyRef
from alignflow.tasks.steps.generate import RolloutConfig, eos_ids, rollout_table
from alignflow.tasks.steps.host_api import Sampler
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.steps.prompts import prompt_batch
from alignflow.tasks.steps.records import StepOutput


def batch_metrics(table: pa.Table) -> dict[str, float]:
    """What a generation step reports: lengths, truncation, tokens, the versions sampled."""
    lengths = table.column("response_len").to_pylist()
    finish = table.column("finish_reason").to_pylist()
    versions = table.column("policy_version").to_pylist()
    return {"response_len_mean": sum(lengths) / len(lengths),
            "truncated_frac": sum(f == "length" for f in finish) / len(finish),
            "tokens": float(sum(lengths)),
            "policy_version_min": float(min(versions)),
            "policy_version_max": float(max(versions))}


def offset_samples(table: pa.Table, offset: int) -> pa.Table:
    """Shift `sample_idx` by `offset`: a regenerated batch keeps its own sample keys."""
    if not offset:
        return table
    shifted = pa.array([s + offset for s in table.column("sample_idx").to_pylist()], pa.int32())
    return table.set_column(table.schema.get_field_index("sample_idx"), "sample_idx", shifted)


def generate_at(host: Sampler, prompts: StepOutput, iteration: int, cfg: RolloutConfig,
                policy: PolicyRef, sample_offset: int = 0,
                replaces_staleness: int | None = None) -> StepOutput:
    """Iteration `iteration`'s rollouts sampled with `policy`. A regeneration passes the
    staleness of the batch it replaces (counted in `metrics` as `regenerated_batches`)."""
    scope = current_scope()
    host.use_policy(scope.store, policy)
    batch = prompt_batch(scope.store, prompts, iteration, cfg.batch_size)
    tok = host.tokenizer
    samples = host.engine.generate(batch.column("prompt_ids").to_pylist(),
                                   cfg.sampling(scope.seed, eos_ids(tok)))
    table = offset_samples(rollout_table(scope, iteration, batch, samples, tok), sample_offset)
    ref = scope.write(ROLLOUTS, table, partition={"iter": iteration})
    if replaces_staleness is not None:
        write_metrics(scope, [(iteration, {"regenerated_batches": 1.0,
                                           "stale_batch_staleness": replaces_staleness})],
                      partition={"iter": iteration})
    return StepOutput((ref,), table.num_rows, batch_metrics(table))


def drop_batch(host: Sampler, iteration: int, staleness: int) -> dict[str, float]:
    """Record that iteration `iteration`'s batch was too stale to learn from."""
    scope = current_scope()
    values = {"dropped_batches": 1.0, "stale_batch_staleness": float(staleness)}
    write_metrics(scope, [(iteration, values)], partition={"iter": iteration})
    return values
