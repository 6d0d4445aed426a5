"""Test-wide settings. Fixtures live in tests/fixtures/<area>.py, one module per area."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# The session's own machine state, inherited by every child process and removed at the end:
# the signing key (flows/trust/signing.py; the user's under ~/.config is never read or made),
# the catalog's index (catalog/index.py) and the dry run's speed figure (flows/cli/speed.py),
# none of them the user's ~/.cache.
_SESSION = tempfile.mkdtemp(prefix="alignflow-tests-")
atexit.register(shutil.rmtree, _SESSION, ignore_errors=True)
os.environ.setdefault("ALIGNFLOW_KEY_FILE", os.path.join(_SESSION, "key", "signing.key"))
os.environ.setdefault("ALIGNFLOW_CATALOG_CACHE", os.path.join(_SESSION, "catalog"))
os.environ.setdefault("ALIGNFLOW_SPEED_FILE", os.path.join(_SESSION, "speed.json"))
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
