"""The `rollouts` view: generated samples joined with the columns later steps committed.

RL steps each commit their own table keyed by (run_id, iteration, prompt_id, sample_idx) —
`rollout_scores`, `rollout_reference`, `rollout_values`, `rollout_advantages`,
`rollout_consumption` — so no step rewrites another's data. This view puts the columns back on the rollout rows, which is what
users query; the step tables stay queryable on their own.
"""

from __future__ import annotations

from alignflow.artifacts.metric_names import sql_case

GENERATED = "_af_rollouts_generated"
METRICS_RAW = "_af_metrics_rows"
# `metrics` with every key in the one namespace (runs written before it kept short names)
METRICS_VIEW = (f"CREATE OR REPLACE VIEW metrics AS SELECT * REPLACE ({sql_case('key')} AS key) "
                f"FROM {METRICS_RAW}")
KEY = ("run_id", "iteration", "prompt_id", "sample_idx")
STEP_COLUMNS: dict[str, tuple[str, ...]] = {
    "rollout_scores": ("reward", "scores"),
    "rollout_reference": ("ref_logprobs",),
    "rollout_values": ("values",),
    "rollout_advantages": ("advantages", "returns", "kl"),
}
# columns that only a step table has (the generated rows do not carry them)
STEP_ONLY_COLUMNS: dict[str, tuple[str, ...]] = {
    "rollout_consumption": ("consumed_at_step", "learner_version", "staleness"),
}


def rollouts_view_sql(tables: set[str]) -> str:
    """CREATE VIEW rollouts over the generated rows and whichever step tables exist. The
    generated rows are read without Hive partitioning (connection.py): their `iter=N`
    folder is not a column, `iteration` is the one iteration column."""
    joins, replaced, added = [], [], []
    for i, table in enumerate([*STEP_COLUMNS, *STEP_ONLY_COLUMNS]):
        if table not in tables:
            continue
        alias = f"s{i}"
        on = " AND ".join(f"{alias}.{k} = g.{k}" for k in KEY)
        joins.append(f'LEFT JOIN "{table}" {alias} ON {on}')
        replaced += [f'coalesce({alias}."{c}", g."{c}") AS "{c}"'
                     for c in STEP_COLUMNS.get(table, ())]
        added += [f'{alias}."{c}"' for c in STEP_ONLY_COLUMNS.get(table, ())]
    replace = f" REPLACE ({', '.join(replaced)})" if replaced else ""
    extra = "".join(f", {c}" for c in added)
    return (f"CREATE OR REPLACE VIEW rollouts AS SELECT g.*{replace}{extra} FROM {GENERATED} g "
            + " ".join(joins))
