"""alignflow: train and align language models as durable flows on Ray.

The public face. Heavy pieces (Ray, torch) are imported on first use, so `import alignflow`
stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

__version__ = "0.1.0"


def _checkout_root() -> Path | None:
    """The repository root when this file is a checkout's, not an installed package's."""
    root = Path(__file__).resolve().parent.parent
    marks = ("flows", "tasks", "artifacts", "catalog")
    if (root / "pyproject.toml").is_file() and all(
            (root / m / "__init__.py").is_file() for m in marks):
        return root
    return None


# A checkout holds the subpackages beside this folder (pyproject's package-dir mapping), so a
# checkout on sys.path is the package only when they resolve from here too: Ray puts the
# driver's working directory first on every worker's path, and a command run from a clone
# with a non-editable install would otherwise import a package without its subpackages.
if (_root := _checkout_root()) is not None and str(_root) not in __path__:
    __path__.append(str(_root))

# public name -> module that defines it
_EXPORTS = {
    "flow": "alignflow.flows.engine",
    "task": "alignflow.flows.engine",
    "gather": "alignflow.flows.engine",
    "sleep": "alignflow.flows.engine",
    "wait_for": "alignflow.flows.engine",
    "scope": "alignflow.flows.engine",
    "worker_group": "alignflow.flows.ray.workers",
    "run": "alignflow.flows.control.api",
    "resume": "alignflow.flows.control.api",
    "resume_all": "alignflow.flows.control.api",
    "send_event": "alignflow.flows.control.api",
    "tick": "alignflow.flows.control.api",
    "list_runs": "alignflow.flows.control.api",
    "get_status": "alignflow.flows.control.api",
    "get_output": "alignflow.flows.control.api",
    "get_metadata": "alignflow.flows.control.api",
    "cancel": "alignflow.flows.control.api",
    "delete": "alignflow.flows.control.api",
    "Store": "alignflow.artifacts.store",
    "Catalog": "alignflow.catalog.catalog",
    "current_scope": "alignflow.artifacts.scope",
    "journal_record": "alignflow.flows.journal.codec",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'alignflow' has no attribute {name!r}")
