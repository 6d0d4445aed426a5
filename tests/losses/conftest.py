"""The RL flow settings the loss tests share (`tests/rl/conftest.py`)."""

from tests.rl.conftest import rl_sets  # noqa: F401
