"""The steps several flow families share, as journalled tasks: prompt loading, generation,
scoring, weight sync and the HF export (`tasks/steps`). RL flows and the durable loops
place them on their hosts with `.options(worker=..., key=...)`.
"""

from __future__ import annotations

from alignflow.flows.engine import task
from alignflow.flows.lazyref import LazyRef

# The bodies and the host run in workers; the driver names them (`flows/lazyref.py`).
load_prompts = task(version=1)("alignflow.tasks.steps.prompts:load_prompts")
generate_rollouts = task(version=1)("alignflow.tasks.steps.generate:generate")
score_rollouts = task(version=1)("alignflow.tasks.steps.score:score")
sync_weights = task(version=1)("alignflow.tasks.steps.sync:sync")
export_model = task(version=1)("alignflow.tasks.steps.export:export_model")
MODEL_HOST = LazyRef("alignflow.tasks.steps.host:ModelHost")
