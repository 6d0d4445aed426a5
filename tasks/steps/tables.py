"""Arrow tables of the RL steps besides `rollouts`: one per step, joined by sample key.

`generate` commits `rollouts` (ids, text, behaviour logprobs, policy version); `score`,
`reference` and `learn` each add their columns as their own table, so no step rewrites
another's data and the catalog's `rollouts` view joins them back together.
"""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts import schemas
from alignflow.artifacts.schemas import TableSchema

_KEY = [
    pa.field("run_id", pa.string(), False),
    pa.field("iteration", pa.int32(), False),
    pa.field("task_key", pa.string(), False),
    pa.field("prompt_id", pa.string(), False),
    pa.field("sample_idx", pa.int32(), False),
]
_F32_LIST = pa.list_(pa.float32())

PROMPTS = schemas.register(TableSchema("prompts", "1.0", pa.schema([
    pa.field("run_id", pa.string(), False),
    pa.field("task_key", pa.string(), False),
    pa.field("prompt_id", pa.string(), False),
    pa.field("position", pa.int32(), False),
    pa.field("prompt", pa.string()),
    pa.field("prompt_ids", pa.list_(pa.int32())),
    pa.field("label", pa.string()),
    pa.field("source", pa.string()),
])))

SCORES = schemas.register(TableSchema("rollout_scores", "1.0", pa.schema([
    *_KEY,
    pa.field("reward", pa.float32()),
    pa.field("scores", pa.map_(pa.string(), pa.float32())),
])))

REFERENCE = schemas.register(TableSchema("rollout_reference", "1.0", pa.schema([
    *_KEY,
    pa.field("ref_logprobs", _F32_LIST),
])))

VALUES = schemas.register(TableSchema("rollout_values", "1.0", pa.schema([
    *_KEY,
    pa.field("values", _F32_LIST),
])))

ADVANTAGES = schemas.register(TableSchema("rollout_advantages", "1.0", pa.schema([
    *_KEY,
    pa.field("advantages", _F32_LIST),
    pa.field("returns", _F32_LIST),
    pa.field("kl", pa.float32()),
    pa.field("kept", pa.bool_()),
])))
