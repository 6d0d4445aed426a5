"""The table the loops commit besides `rollouts`, `preferences` and the offline step's
tables: `rollout_selection` marks which generated samples a round kept (keyed like the RL
step tables, so it joins onto `rollouts`).
"""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts import schemas
from alignflow.artifacts.schemas import TableSchema

SELECTION = schemas.register(TableSchema("rollout_selection", "1.0", pa.schema([
    pa.field("run_id", pa.string(), False),
    pa.field("iteration", pa.int32(), False),
    pa.field("task_key", pa.string(), False),
    pa.field("prompt_id", pa.string(), False),
    pa.field("sample_idx", pa.int32(), False),
    pa.field("round", pa.int32()),
    pa.field("role", pa.string()),          # "best" | "chosen" | "rejected"
    pa.field("pair_id", pa.string()),
    pa.field("reward", pa.float32()),
])))
