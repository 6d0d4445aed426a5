"""The RL and offline flow tests' fixtures, for the LoRA flow tests."""

from tests.offline.conftest import base_sets, pairs_file  # noqa: F401
from tests.rl.conftest import rl_sets  # noqa: F401
