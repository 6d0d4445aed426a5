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

# 1.1: datasource, a row's `datasource` column (RL evaluation reports per data source)
PROMPTS = schemas.register(TableSchema("prompts", "1.1", pa.schema([
    pa.field("run_id", pa.string(), False),
    pa.field("task_key", pa.string(), False),
    pa.field("prompt_id", pa.string(), False),
    pa.field("position", pa.int32(), False),
    pa.field("prompt", pa.string()),
    pa.field("prompt_ids", pa.list_(pa.int32())),
    pa.field("label", pa.string()),
    pa.field("source", pa.string()),
    pa.field("datasource", pa.string()),
])))

# 1.1: filter_score, what dynamic filtering reads (OpenRLHF's `scores`; null: the reward)
SCORES = schemas.register(TableSchema("rollout_scores", "1.1", pa.schema([
    *_KEY,
    pa.field("reward", pa.float32()),
    pa.field("scores", pa.map_(pa.string(), pa.float32())),
    pa.field("filter_score", pa.float32()),
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

# which learn step consumed each sample, under which learner weights (every RL run)
CONSUMPTION = schemas.register(TableSchema("rollout_consumption", "1.0", pa.schema([
    *_KEY,
    pa.field("consumed_at_step", pa.int32()),
    pa.field("learner_version", pa.int32()),
    pa.field("staleness", pa.int32()),
])))

# partial rollouts: the tokens one segment added to each unfinished response
SEGMENTS = schemas.register(TableSchema("rollout_segments", "1.0", pa.schema([
    *_KEY,
    pa.field("segment", pa.int32()),
    pa.field("policy_version", pa.int32()),
    pa.field("response_ids", pa.list_(pa.int32())),
    pa.field("behaviour_logprobs", _F32_LIST),
    pa.field("finish_reason", pa.string()),
])))

# multi-turn agent episodes: one row per turn (policy action, then the environment's answer)
TURNS = schemas.register(TableSchema("rollout_turns", "1.0", pa.schema([
    *_KEY,
    pa.field("turn", pa.int32()),
    pa.field("action", pa.string()),
    pa.field("feedback", pa.string()),
    pa.field("reward", pa.float32()),
    pa.field("done", pa.bool_()),
    pa.field("action_tokens", pa.int32()),
    pa.field("feedback_tokens", pa.int32()),
])))

# RL evaluation on its own prompt set (`tasks/rl/evaluate.py`): samples, then their rewards
EVAL_SAMPLES = schemas.register(TableSchema("eval_samples", "1.0", pa.schema([
    *_KEY, pa.field("prompt", pa.string()), pa.field("response", pa.string()),
    pa.field("response_len", pa.int32()), pa.field("finish_reason", pa.string()),
    pa.field("label", pa.string()), pa.field("datasource", pa.string()),
])))
# 1.1: correct, the answer's exact correctness (a reward source's `correct` score; null: none)
EVAL_SCORES = schemas.register(TableSchema("eval_scores", "1.1", pa.schema([
    *_KEY, pa.field("reward", pa.float32()), pa.field("correct", pa.float32()),
])))
