"""The steps of an RL iteration (generate, score, reference, learn, sync) and the model host.

Each step reads its inputs from the store and commits its own table keyed by
(run_id, iteration, prompt_id, sample_idx); the catalog's `rollouts` view joins them.
"""

# Importing the package registers its tables, so any process reading them knows the schemas.
from alignflow.tasks.rl import tables as _tables  # noqa: F401
