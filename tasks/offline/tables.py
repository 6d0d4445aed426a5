"""The offline flows' own tables: prepared examples and reference log-probs."""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts import schemas
from alignflow.artifacts.schemas import TableSchema


def _f(name: str, type_: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


# One row per prepared example. SFT-like kinds fill input_ids/loss_mask (PRM: labels);
# pair kinds fill input_ids (the prompt), chosen_ids and rejected_ids, and (1.1) margin:
# the data set's per-pair `margin` column (OpenRLHF's margin loss; null: none given).
OFFLINE_EXAMPLES = schemas.register(TableSchema("offline_examples", "1.1", pa.schema([
    _f("run_id", pa.string(), False),
    _f("task_key", pa.string(), False),
    _f("example_id", pa.string(), False),
    _f("split", pa.string(), False),
    _f("position", pa.int32(), False),
    _f("prompt", pa.string()),
    _f("response", pa.string()),
    _f("rejected", pa.string()),
    _f("input_ids", pa.list_(pa.int32())),
    _f("loss_mask", pa.list_(pa.int8())),
    _f("chosen_ids", pa.list_(pa.int32())),
    _f("rejected_ids", pa.list_(pa.int32())),
    _f("labels", pa.list_(pa.int32())),
    _f("truncated", pa.bool_()),
    _f("margin", pa.float64()),
])))

# Reference log-probs (summed over response tokens) per example; `kl` = the KTO KL sample
# (prompt i with the chosen response of example i+1 of the same split).
OFFLINE_REFERENCE = schemas.register(TableSchema("offline_reference", "1.0", pa.schema([
    _f("run_id", pa.string(), False),
    _f("task_key", pa.string(), False),
    _f("split", pa.string(), False),
    _f("position", pa.int32(), False),
    _f("chosen", pa.float64()),
    _f("rejected", pa.float64()),
    _f("kl", pa.float64()),
])))
