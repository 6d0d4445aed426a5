"""The artifact store: URIs over fsspec, versioned Arrow schemas, Parquet data files, atomic
manifest commits, checkpoints. Imports nothing else of alignflow's (its errors and
`alignflow.lazy` aside).

The Arrow names (schemas, Parquet I/O, task scopes) are imported on first use
(`alignflow/lazy.py`), so a reader of manifests and JSON (`alignflow sql` before its first
answer) loads no pyarrow or numpy. `commit` stays bound at once: it is also a submodule's
name, and binding the function as the package loads keeps `from alignflow.artifacts import
commit` the function whatever imports the module later.
`checkpoints` and `tensors` (which need torch) are submodules imported on use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alignflow.artifacts.commit import commit, committed_files, load_manifest
from alignflow.artifacts.store import Store
from alignflow.lazy import exports

if TYPE_CHECKING:  # the checker sees the real names; a run imports them on first use
    from alignflow.artifacts import schemas
    from alignflow.artifacts.parquet_io import ArtifactRef, iter_batches, read_table, write_table
    from alignflow.artifacts.schemas import TableSchema
    from alignflow.artifacts.scope import TaskScope, current_scope, use_scope

_EXPORTS = {
    "ArtifactRef": "parquet_io",
    "iter_batches": "parquet_io",
    "read_table": "parquet_io",
    "write_table": "parquet_io",
    "TableSchema": "schemas",
    "TaskScope": "scope",
    "current_scope": "scope",
    "use_scope": "scope",
}

__all__ = [
    "ArtifactRef",
    "Store",
    "TableSchema",
    "TaskScope",
    "commit",
    "committed_files",
    "current_scope",
    "iter_batches",
    "load_manifest",
    "read_table",
    "schemas",
    "use_scope",
    "write_table",
]

_names = exports(__name__, _EXPORTS)


def __getattr__(name: str) -> object:
    """A name of `_EXPORTS` from its module, or the `schemas` submodule, imported on use."""
    if name == "schemas":
        import importlib

        return importlib.import_module(f"{__name__}.schemas")
    return _names(name)
