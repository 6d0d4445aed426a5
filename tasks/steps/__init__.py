"""The steps RL flows and durable loops share: the model host, prompt loading, generation,
scoring, weight sync, export, and the step tables they commit.

Each step reads its inputs from the store and commits its own table keyed by
(run_id, iteration, prompt_id, sample_idx); the catalog's `rollouts` view joins them.
"""

# Importing the package registers its tables, so any process reading them knows the schemas.
from alignflow.tasks.steps import tables as _tables  # noqa: F401
