"""Tables of campaign lineage: which input files fed which round, and what each round did.

A campaign's tasks commit them under the campaign's run; the catalog's `rounds` and
`campaigns` views (catalog/campaigns.sql) join them with `runs`, so "which round promoted
which checkpoint" and "which files fed which round" are SQL queries.
"""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts import schemas
from alignflow.artifacts.schemas import TableSchema

INPUTS = schemas.register(TableSchema("campaign_inputs", "1.0", pa.schema([
    pa.field("run_id", pa.string(), False),
    pa.field("task_key", pa.string(), False),
    pa.field("round", pa.int32(), False),
    pa.field("due", pa.float64()),
    pa.field("path", pa.string(), False),  # the file's URL in the source
    pa.field("size", pa.int64()),
    pa.field("stamp", pa.string()),  # ETag or mtime when it was listed
    pa.field("round_run", pa.string()),
])))

ROUNDS = schemas.register(TableSchema("campaign_rounds", "1.0", pa.schema([
    pa.field("run_id", pa.string(), False),
    pa.field("task_key", pa.string(), False),
    pa.field("round", pa.int32(), False),
    pa.field("due", pa.float64()),
    pa.field("status", pa.string()),  # promoted | refused | paused | no_input
    pa.field("round_run", pa.string()),
    pa.field("inputs", pa.int32()),
    pa.field("skipped_due_times", pa.int32()),
    pa.field("policy_in_version", pa.int32()),
    pa.field("policy_in", pa.string()),
    pa.field("candidate", pa.string()),
    pa.field("metric", pa.string()),
    pa.field("candidate_score", pa.float64()),
    pa.field("incumbent_score", pa.float64()),
    pa.field("promoted", pa.bool_()),
    pa.field("policy_out_version", pa.int32()),
    pa.field("policy_out", pa.string()),
    pa.field("eval_iteration", pa.int32()),
    pa.field("ts", pa.float64()),
])))
