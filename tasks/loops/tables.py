"""Tables the loops commit besides `rollouts` and `preferences`.

`rollout_selection` marks which generated samples a round kept (keyed like the RL step
tables, so it joins onto `rollouts`); `pair_reference` holds the round reference's summed
log-probs of each pair, computed once before the round's DPO training.
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

PAIR_REFERENCE = schemas.register(TableSchema("pair_reference", "1.0", pa.schema([
    pa.field("run_id", pa.string(), False),
    pa.field("round", pa.int32(), False),
    pa.field("task_key", pa.string(), False),
    pa.field("pair_id", pa.string(), False),
    pa.field("ref_chosen", pa.float32()),
    pa.field("ref_rejected", pa.float32()),
])))
