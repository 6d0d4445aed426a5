"""The steps several flow families share, as journalled tasks: prompt loading, generation,
scoring, weight sync and the HF export (`tasks/steps`). RL flows and the durable loops
place them on their hosts with `.options(worker=..., key=...)`.
"""

from __future__ import annotations

from alignflow.flows.engine import task
from alignflow.tasks.steps import export, generate, prompts, score, sync

load_prompts = task(version=1)(prompts.load_prompts)
generate_rollouts = task(version=1)(generate.generate)
score_rollouts = task(version=1)(score.score)
sync_weights = task(version=1)(sync.sync)
export_model = task(version=1)(export.export_model)
