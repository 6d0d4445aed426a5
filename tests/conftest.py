"""Test-wide settings. Fixtures live in tests/fixtures/<area>.py, one module per area."""

import os
import tempfile

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# This test machine's signing key (flows/trust/signing.py), one per session, inherited by
# every child process; the user's own key under ~/.config is never read or made.
os.environ.setdefault("ALIGNFLOW_KEY_FILE", os.path.join(
    tempfile.mkdtemp(prefix="alignflow-key-"), "signing.key"))
# The catalog's index of what it read (catalog/index.py): the session's own, not ~/.cache.
os.environ.setdefault("ALIGNFLOW_CATALOG_CACHE", tempfile.mkdtemp(prefix="alignflow-catalog-"))
# With deepspeed and accelerate installed, transformers imports deepspeed on model load, and
# deepspeed prints an accelerator-detection warning to stdout unless told "cpu" up front.
if not os.path.exists("/proc/driver/nvidia"):
    os.environ.setdefault("DS_ACCELERATOR", "cpu")

pytest_plugins = [
    "tests.fixtures.store",
    "tests.fixtures.s3",
    "tests.fixtures.models",
    "tests.fixtures.ray",
    "tests.fixtures.code",
    "tests.fixtures.simulated",
    "tests.fixtures.sources",
]
