"""The RL-only steps: reference log-probs and critic values, advantages (experience), the
PPO-family learn step and its pretraining-mix term. Shared steps are in `tasks/steps`."""

# Importing the package registers the step tables, so any process reading them knows them.
from alignflow.tasks.steps import tables as _tables  # noqa: F401
