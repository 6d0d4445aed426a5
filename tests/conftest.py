"""Test-wide settings. Fixtures live in tests/fixtures/<area>.py, one module per area."""

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

pytest_plugins = [
    "tests.fixtures.store",
    "tests.fixtures.s3",
    "tests.fixtures.models",
    "tests.fixtures.ray",
]
