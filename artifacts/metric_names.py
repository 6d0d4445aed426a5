"""One namespace for metric names, shared by the `metrics` table, TensorBoard, W&B and the
report: `train/*` (what a learn or train step measured: `train/policy_loss`, `train/kl`,
`train/lr`, ...), `rollout/*` (what generation and scoring gave: `rollout/reward_mean`,
`rollout/score/<source>/...`), `eval/*`, `perf/*` (times, GPU memory) and `data/*`.

Steps keep their own short names in their outputs; `write_metrics` stores `canonical`
names, and the catalog's `metrics` view maps the names of runs written before
(`sql_case`), so old and new runs read the same.

The step axis: every row's `step` is the run's iteration for RL flows and loop rounds'
`rollout/*`, and the optimizer step for offline training (and loops' `train/*`); W&B and
TensorBoard plot each name against one of the two (`axis`).
"""

from __future__ import annotations

NAMESPACES = ("train/", "eval/", "rollout/", "perf/", "data/")
RENAMED = {
    "loss": "train/policy_loss", "policy_loss": "train/policy_loss",
    "step": "train/global_step",
    "reward_mean": "rollout/reward_mean", "reward_std": "rollout/reward_std",
    "response_len_mean": "rollout/response_len_mean", "truncated_frac": "rollout/truncated_frac",
    "tokens": "rollout/tokens", "staleness_mean": "rollout/staleness_mean",
    "staleness_max": "rollout/staleness_max", "batch_version_min": "rollout/batch_version_min",
    "batch_version_max": "rollout/batch_version_max",
    "regenerated_batches": "rollout/regenerated_batches",
    "dropped_batches": "rollout/dropped_batches",
    "stale_batch_staleness": "rollout/stale_batch_staleness",
    "learn_seconds": "perf/learn_seconds",
}
PREFIXED = {"score/": "rollout/score/", "log/": "rollout/log/", "mismatch/": "rollout/mismatch/",
            "gpu/": "perf/gpu/", "critic/": "train/critic/"}


def canonical(key: str) -> str:
    """The namespaced name of a step's metric (a namespaced name is returned as it is; a
    bare learn-step name goes under `train/`)."""
    if key.startswith(NAMESPACES):
        return key
    if key in RENAMED:
        return RENAMED[key]
    for old, new in PREFIXED.items():
        if key.startswith(old):
            return new + key[len(old):]
    return f"train/{key}"


def axis(key: str, task_key: str) -> str:
    """`iteration` or `step` (the optimizer step): what a row's `step` counts (RL tasks
    `iter-NNNN/...` and a loop round's rollouts count iterations)."""
    if "iter-" in task_key or key.startswith("rollout/") and "round-" in task_key:
        return "iteration"
    return "step"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_case(column: str = "key") -> str:
    """`canonical` as a SQL expression over `column` (the catalog's view of old runs)."""
    whens = [f"WHEN starts_with({column}, {_quote(n)}) THEN {column}" for n in NAMESPACES]
    whens += [f"WHEN {column} = {_quote(k)} THEN {_quote(v)}" for k, v in RENAMED.items()]
    whens += [f"WHEN starts_with({column}, {_quote(k)}) THEN {_quote(v)} || "
              f"substr({column}, {len(k) + 1})" for k, v in PREFIXED.items()]
    return f"CASE {' '.join(whens)} ELSE 'train/' || {column} END"
