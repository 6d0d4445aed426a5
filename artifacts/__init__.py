"""The artifact store: URIs over fsspec, versioned Arrow schemas, Parquet data files, atomic
manifest commits, checkpoints. Imports nothing else of alignflow's.

`checkpoints` and `tensors` (which need torch) are submodules imported on use.
"""

from alignflow.artifacts import schemas
from alignflow.artifacts.commit import commit, committed_files, load_manifest
from alignflow.artifacts.parquet_io import ArtifactRef, iter_batches, read_table, write_table
from alignflow.artifacts.schemas import TableSchema
from alignflow.artifacts.scope import TaskScope, current_scope, use_scope
from alignflow.artifacts.store import Store

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
