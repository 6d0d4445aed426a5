"""Score rollouts with the run's reward sources. Reads: rollouts. Commits: rollout_scores."""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.rewards.base import RewardOutput
from alignflow.tasks.rewards.combine import groups_in_range
from alignflow.tasks.steps import gpu_memory
from alignflow.tasks.steps.host_api import Scorer
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.tables import SCORES

KEY = ["run_id", "iteration", "prompt_id", "sample_idx"]


def score(host: Scorer, rollouts: StepOutput, iteration: int,
          filtering: tuple[int, float, float] | None = None, quiet: bool = False) -> StepOutput:
    """Rewards for every sample (OpenRLHF's conventions: query = prompt + response, a
    prompt without a label has the label ""). Commits the scores and the step's metrics
    (reward mean/std, each score's mean, each extra log: per-sample ones averaged, batch
    ones as given); with `filtering` (n, low, high) also `filter_groups_passed`, the
    groups dynamic filtering keeps (a refilled iteration counts them); `quiet`: a refill
    round after the first, whose metrics are not the iteration's."""
    scope = current_scope()
    table = read_table(scope.store, rollouts.refs, columns=[*KEY, "prompt", "response", "label"])
    prompts = table.column("prompt").to_pylist()
    responses = table.column("response").to_pylist()
    labels = ["" if label is None else label for label in table.column("label").to_pylist()]
    gpu_memory.start(host)
    out = host.reward.score([p + r for p, r in zip(prompts, responses, strict=True)],
                            prompts, labels)
    host.idle("reward")
    ref = scope.write(SCORES, _scores_table(table, out, scope.task_key),
                      partition={"iter": iteration})
    rewards = out.rewards.float()
    metrics = {"reward_mean": float(rewards.mean()), "reward_std": float(rewards.std())
               if len(rewards) > 1 else 0.0}
    metrics |= {f"score/{k}": float(v.float().mean()) for k, v in out.scores.items()}
    metrics |= {f"log/{k}": float(v.float().mean()) for k, v in out.extra_logs.items()}
    metrics |= gpu_memory.peak_metrics(host, "reward")  # written with the rest below
    metrics |= {f"log/{k}": float(v) for k, v in out.batch_logs.items()}
    if not quiet:
        write_metrics(scope, [(iteration, metrics)], partition={"iter": iteration})
    if filtering is not None:  # in the task's output only, not a metric of the iteration
        n, low, high = filtering
        scores = out.rewards if out.filter_scores is None else out.filter_scores
        metrics["filter_groups_passed"] = float(groups_in_range(scores, n, low, high).sum())
    return StepOutput((ref,), table.num_rows, metrics)


def _scores_table(table: pa.Table, out: RewardOutput, task_key: str) -> pa.Table:
    """`rollout_scores` rows of `table`'s samples: reward, named scores, filter score."""
    names = sorted(out.scores)
    scores = [[(k, float(out.scores[k][i])) for k in names] for i in range(table.num_rows)]
    return pa.table({
        **{k: table.column(k) for k in ("run_id", "iteration")},
        "task_key": [task_key] * table.num_rows,
        **{k: table.column(k) for k in ("prompt_id", "sample_idx")},
        "reward": pa.array(out.rewards.tolist(), pa.float32()),
        "scores": pa.array(scores, pa.map_(pa.string(), pa.float32())),
        "filter_score": pa.nulls(table.num_rows, pa.float32()) if out.filter_scores is None
        else pa.array(out.filter_scores.tolist(), pa.float32()),
    })
