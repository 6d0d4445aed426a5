"""Write and read the Parquet data files of a store.

A writer streams row groups into a temp file that nobody else looks at, and only then puts
the finished file under its unique name; even that name stays invisible to readers until a
manifest lists it (`commit`). So an exception or a kill mid-write leaves at most an orphan
temp file (local) or nothing at all (S3: the upload starts after the file is complete).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from alignflow.artifacts import schemas
from alignflow.artifacts.conform import conform
from alignflow.artifacts.journal import journal_record
from alignflow.artifacts.s3errors import translate_errors
from alignflow.artifacts.schemas import TableSchema
from alignflow.artifacts.store import Store
from alignflow.errors import AlignflowError, ConfigError, SchemaError

ROW_GROUP_ROWS = 64 * 1024
ROW_GROUP_BYTES = 64 * 2**20


@journal_record
@dataclass(frozen=True)
class ArtifactRef:
    """One committed (or staged) data file, as listed in a manifest."""

    table: str
    path: str
    rows: int
    schema: str
    schema_version: str
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ArtifactRef:
        try:
            return cls(**{k: obj[k] for k in cls.__dataclass_fields__})
        except KeyError as exc:
            raise SchemaError(f"artifact entry {obj!r} lacks field {exc.args[0]!r}") from None


RefLike = ArtifactRef | dict | str


def _segment(value: object, what: str) -> str:
    text = str(value)
    if not text or any(c in text for c in "/=\\") or text.startswith("."):
        raise ConfigError(f"{what} {text!r} cannot be a path segment; expected no '/', '=' or "
                          "leading '.'")
    return text


def data_path(run_id: str, table: str, task: str, partition: dict[str, int | str]) -> str:
    """`runs/<run_id>/<table>/<k>=<v>/.../<task>-<uuid>.parquet` (Hive-style partitions)."""
    parts = [f"{_segment(k, 'partition key')}={_segment(v, 'partition value')}"
             for k, v in partition.items()]
    name = f"{_segment(task.replace('/', '-'), 'task')}-{uuid.uuid4().hex}.parquet"
    return "/".join(["runs", _segment(run_id, "run_id"), table, *parts, name])


def _batches(data: Any) -> Iterator[pa.RecordBatch | pa.Table]:
    if isinstance(data, dict):
        data = pa.table(data)
    if isinstance(data, pa.Table | pa.RecordBatch):
        yield data
    else:
        yield from data


def _stream(writer: pq.ParquetWriter, data: Any, schema: TableSchema,
            fill: dict[str, object]) -> int:
    """Write conformed row groups as batches arrive; buffers at most one row group."""
    rows, buf_rows, buf_bytes = 0, 0, 0
    buf: list[Any] = []

    def flush() -> None:
        if buf:
            writer.write_table(pa.Table.from_batches(buf, schema.with_metadata()),
                               row_group_size=ROW_GROUP_ROWS)
            buf.clear()

    for part in _batches(data):
        part = conform(part, schema, fill)
        rows += part.num_rows
        for batch in part.to_batches() if isinstance(part, pa.Table) else [part]:
            buf.append(batch)
            buf_rows, buf_bytes = buf_rows + batch.num_rows, buf_bytes + batch.nbytes
            if buf_rows >= ROW_GROUP_ROWS or buf_bytes >= ROW_GROUP_BYTES:
                flush()
                buf_rows = buf_bytes = 0
    flush()
    return rows


def _temp_path(store: Store, rel: str) -> str:
    """Local stores: a hidden temp next to the target (same disk, rename is atomic), its
    folders made without following a link (`Store.writable_path`)."""
    if store.is_local:
        folder, name = rel.rsplit("/", 1)
        return store.writable_path(f"{folder}/.{name}.tmp")
    fd, path = tempfile.mkstemp(prefix="alignflow-", suffix=".parquet")
    os.close(fd)
    return path


def write_table(store: Store, table_name: str | TableSchema, data: Any, *, run_id: str,
                task: str, partition: dict[str, int | str] | None = None,
                task_key: str | None = None) -> ArtifactRef:
    """Write `data` (a pa.Table, RecordBatch, dict of columns or an iterable of batches) as
    one new Parquet file; absent `run_id`/`task_key` columns are filled from the arguments.
    Not visible to readers until a manifest lists the returned ref."""
    schema = table_name if isinstance(table_name, TableSchema) else schemas.get(table_name)
    rel = data_path(run_id, schema.name, task, partition or {})
    fill: dict[str, object] = {"run_id": run_id}
    if task_key is not None:
        fill["task_key"] = task_key
    tmp = _temp_path(store, rel)
    try:
        with translate_errors(store.url, rel):  # a full disk is one line naming the store
            with pq.ParquetWriter(tmp, schema.with_metadata(), compression="zstd",
                                  use_dictionary=schema.dictionary_columns) as writer:
                rows = _stream(writer, data, schema, fill)
            size = os.path.getsize(tmp)
        store.put_file(tmp, rel)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return ArtifactRef(schema.name, rel, rows, schema.name, schema.version, size)


def _as_ref(ref: RefLike) -> ArtifactRef | str:
    return ArtifactRef.from_json(ref) if isinstance(ref, dict) else ref


def _check_version(store: Store, rel: str, meta: dict[bytes, bytes] | None) -> TableSchema:
    meta = meta or {}
    name = meta.get(schemas.META_NAME, b"").decode()
    version = meta.get(schemas.META_VERSION, b"").decode()
    known = schemas.SCHEMAS.get(name)
    if known is None or not version:
        raise SchemaError(f"{store.url}/{rel}: no known alignflow schema in its metadata "
                          f"(got {name or 'none'!r} {version or ''}); expected one of "
                          f"{sorted(schemas.SCHEMAS)}")
    if version.split(".")[0] != str(known.major):
        raise SchemaError(f"{store.url}/{rel}: schema {name} version {version} has an unknown "
                          f"major version; this alignflow reads {name} {known.major}.x")
    return known


def _corrupt(store: Store, rel: str, exc: Exception) -> Exception:
    """A corrupt file is a SchemaError; storage trouble keeps its own type."""
    if isinstance(exc, AlignflowError | FileNotFoundError | PermissionError):
        return exc
    return SchemaError(f"{store.url}/{rel}: not a readable Parquet file ({exc})")


def _arrow_fs(store: Store) -> pafs.FileSystem | None:
    """None (Arrow's native local I/O) or the store's fsspec filesystem wrapped for Arrow."""
    return None if store.is_local else pafs.PyFileSystem(pafs.FSSpecHandler(store.fs))


def _source(store: Store, ref: ArtifactRef | str) -> tuple[str, str]:
    """(store path, what Arrow opens): locally a regular file reached through no link, of
    the size its manifest records (a missing one is a FileNotFoundError naming it)."""
    rel = ref if isinstance(ref, str) else ref.path
    if not store.is_local:
        return rel, store.path(rel)
    try:
        return rel, store.readable_path(rel, None if isinstance(ref, str) else ref.bytes)
    except FileNotFoundError:
        raise FileNotFoundError(f"{store.url}/{rel}: committed file is missing") from None


@contextlib.contextmanager
def _parquet(store: Store, rel: str, path: str) -> Iterator[tuple[pq.ParquetFile, TableSchema]]:
    """Local files go to Arrow's native reader (no Python file object in the loop); remote
    ones through fsspec with coalesced, pre-buffered range reads."""
    with contextlib.ExitStack() as stack:
        fs = _arrow_fs(store)
        try:
            with translate_errors(store.url, rel):
                pf = stack.enter_context(pq.ParquetFile(path, filesystem=fs, pre_buffer=True))
        except (pa.ArrowInvalid, OSError) as exc:
            raise _corrupt(store, rel, exc) from None
        yield pf, _check_version(store, rel, pf.schema_arrow.metadata)


def _upgrade(data: pa.Table | pa.RecordBatch, known: TableSchema,
             columns: Sequence[str] | None) -> pa.Table:
    """Add the known schema's columns that an older minor version lacks, as nulls."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    wanted = list(columns) if columns is not None else known.arrow_schema.names
    for name in wanted:
        if name not in table.column_names:
            idx = known.arrow_schema.get_field_index(name)
            if idx < 0:
                raise SchemaError(f"{known.name}: unknown column {name!r} requested")
            table = table.append_column(known.arrow_schema.field(idx),
                                        pa.nulls(table.num_rows, known.arrow_schema[idx].type))
    return table.select(wanted) if columns is not None else table


def _read_columns(pf: pq.ParquetFile, columns: Sequence[str] | None) -> list[str] | None:
    return None if columns is None else [c for c in columns if c in pf.schema_arrow.names]


def iter_batches(store: Store, refs: Iterable[RefLike], columns: Sequence[str] | None = None,
                 batch_size: int = ROW_GROUP_ROWS) -> Iterator[pa.Table]:
    """Stream committed files as small tables, checking each file's schema version."""
    for ref in map(_as_ref, refs):
        rel, path = _source(store, ref)
        with _parquet(store, rel, path) as (pf, known):
            try:
                for batch in pf.iter_batches(batch_size, columns=_read_columns(pf, columns)):
                    yield _upgrade(batch, known, columns)
            except (pa.ArrowInvalid, OSError) as exc:
                raise _corrupt(store, rel, exc) from None


def _read_file(store: Store, path: str, pf: pq.ParquetFile,
               columns: list[str] | None) -> pa.Table:
    """One row group: read it from the file already open (a small step table: ~1 ms less
    than opening it again). More: the dataset reader, which decodes row groups in parallel."""
    if pf.metadata.num_row_groups <= 1:
        return pf.read(columns=columns, use_threads=True)
    return pq.read_table(path, filesystem=_arrow_fs(store), columns=columns, pre_buffer=True)


def read_table(store: Store, refs: Iterable[RefLike],
               columns: Sequence[str] | None = None) -> pa.Table:
    """All rows of `refs` as one table (older minor versions gain null columns)."""
    tables = []
    for ref in map(_as_ref, refs):
        rel, path = _source(store, ref)
        with _parquet(store, rel, path) as (pf, known):
            try:
                table = _read_file(store, path, pf, _read_columns(pf, columns))
            except (pa.ArrowInvalid, OSError) as exc:
                raise _corrupt(store, rel, exc) from None
            tables.append(_upgrade(table, known, columns))
    if not tables:
        raise ConfigError("read_table: no artifact refs given; expected at least one")
    return pa.concat_tables(tables, promote_options="default")
