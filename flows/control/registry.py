"""Moved to `flows/registry.py`, below `control/`, `ray/` and `trust/` (which all use it).
This old name is the same module, for imports from outside the package (tests, scripts)."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("alignflow.flows.registry")
