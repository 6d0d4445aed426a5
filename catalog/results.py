"""A query's result, batch by batch, within the catalog's limits on rows and bytes.

DuckDB streams the last statement's result as Arrow batches (`to_arrow_reader`), so a
caller that writes each batch out as it comes (`alignflow sql --format csv|json|parquet`)
holds one batch at a time, however big the result; batches are sized from the result's
column types (`batch_rows`), so that one of wide rows stays small too. Counting stops the
query past `SqlLimits.max_rows` rows or `max_bytes` Arrow bytes, with one line naming the
cap and the flag that raises it. An error DuckDB raises while batches are being read
arrives as a plain `OSError` carrying DuckDB's message; `as_duckdb` gives it back its
DuckDB type, so it is worded like any other (a time limit, the memory limit, the corrupt
file it names).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import duckdb

from alignflow.catalog.deadline import stopping
from alignflow.catalog.limits import SqlLimits, human_bytes
from alignflow.errors import QueryLimit

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_ROWS = 65_536  # rows of a batch whose columns are all fixed-width, at most
TEXT_BATCH_ROWS = 512  # of a batch with a string, blob, list, map or struct column
BATCH_BYTES = 8 * 2**20  # what a batch of fixed-width columns is sized to
_FIXED = {"boolean", "tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint",
          "usmallint", "uinteger", "ubigint", "uhugeint", "float", "double", "decimal", "date",
          "time", "time with time zone", "timestamp", "timestamp with time zone",
          "timestamp_s", "timestamp_ms", "timestamp_ns", "interval", "uuid", "enum"}  # ≤ 16 B
Translate = Callable[[duckdb.Error, str, bool], Exception]
_KINDS = {"INTERRUPT Error": duckdb.InterruptException,
          "Out of Memory Error": duckdb.OutOfMemoryException,
          "IO Error": duckdb.IOException, "Invalid Input Error": duckdb.InvalidInputException,
          "Permission Error": duckdb.PermissionException,
          "Serialization Error": duckdb.SerializationException,
          "Conversion Error": duckdb.ConversionException}


def as_duckdb(exc: BaseException) -> duckdb.Error:
    """The DuckDB error an Arrow stream reported as a plain exception (by its message)."""
    text = str(exc)
    kind = next((k for p, k in _KINDS.items() if text.startswith(p)), duckdb.Error)
    return kind(text)


def batch_rows(type_ids: Sequence[str]) -> int:
    """Rows per Arrow batch for a result of these column types: a batch of fixed-width
    columns about `BATCH_BYTES`, one with a variable-width column `TEXT_BATCH_ROWS` (its
    size is not known before it is made). The batch in flight is what the result adds to
    the process's memory (`limits.RSS_MARGIN`): 4,000 rows of 100 kB peaked at 720 MB
    as one batch, 507 MB at 512 rows. Written out, small batches cost little (3M rows of
    ~200-byte strings as CSV: 1.4 s at 65,536 rows and at 512; 2M rollouts rows as JSON:
    16.9 s and 18.3 s)."""
    if any(t not in _FIXED for t in type_ids):
        return TEXT_BATCH_ROWS
    return max(TEXT_BATCH_ROWS, min(BATCH_ROWS, BATCH_BYTES // (16 * max(1, len(type_ids)))))


def short(text: str) -> str:
    return " ".join(text.split())[:80]


class Rows:
    """The result of the last statement: `schema`, then its batches (iterate once)."""

    def __init__(self, limits: SqlLimits, translate: Translate, fired: threading.Event) -> None:
        self.limits, self._translate, self._fired = limits, translate, fired
        self.rows = self.bytes = 0
        self.started = False  # has a batch been handed out?
        self.schema: pa.Schema | None = None
        self.relation: duckdb.DuckDBPyRelation | None = None  # a materialized result
        self._text, self._first = "", None
        self._reader: pa.RecordBatchReader | None = None

    def start(self, cur: duckdb.DuckDBPyConnection, statements: Sequence[str],
              params: object, materialize: bool = False) -> None:
        """Run the statements before the last for their errors, open the last one's result
        and read its first batch (so errors found early can still be retried); with
        `materialize`, hold the whole result in DuckDB instead (`relation`: at most
        `max_rows` rows, the process's memory cap bounding its bytes; no Arrow)."""
        for i, text in enumerate(statements):
            self._text = text
            with self._errors():
                if i < len(statements) - 1:
                    cur.execute(text).fetchall()  # run for its errors; rows unused
                elif materialize:
                    rel = cur.sql(text, params=params)
                    self.relation = rel.limit(self.limits.max_rows + 1).materialize()
                    self.rows = self.relation.shape[0]
                else:
                    rel = cur.sql(text, params=params)
                    self._reader = rel.to_arrow_reader(batch_rows([t.id for t in rel.types]))
        if materialize:
            self._check_caps()
            return
        assert self._reader is not None  # a statement ran and was not materialized
        self.schema = self._reader.schema
        self._first = self._next()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        batch, self._first = self._first, None
        while batch is not None:
            self.started = True
            yield batch
            batch = self._next()

    def read_all(self) -> pa.Table:
        import pyarrow as pa

        return pa.Table.from_batches(list(self), schema=self.schema)

    def _next(self) -> pa.RecordBatch | None:
        assert self._reader is not None  # a materialized result is read from its relation
        with self._errors():
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                return None
        self.rows, self.bytes = self.rows + batch.num_rows, self.bytes + batch.nbytes
        if stopping():  # a signal came while the caller wrote a batch out (process.py)
            raise KeyboardInterrupt
        if self._fired.is_set():  # the deadline passed while the caller wrote a batch out
            raise self._translate(duckdb.InterruptException("deadline"), self._text, True)
        self._check_caps()
        return batch

    def _check_caps(self) -> None:
        if self.rows > self.limits.max_rows:
            raise QueryLimit(f"SQL stopped: `{short(self._text)}` returns more than "
                             f"{self.limits.max_rows:,} rows (--max-rows N; SqlLimits("
                             "max_rows=...)); narrow it with WHERE, LIMIT or GROUP BY")
        if self.bytes > self.limits.max_result_bytes:
            raise QueryLimit(f"SQL stopped: `{short(self._text)}` returns more than "
                             f"{human_bytes(self.limits.max_result_bytes)} (--max-bytes SIZE; "
                             "SqlLimits(max_bytes=...)); select fewer columns or rows")

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Errors of DuckDB (also those arriving through the Arrow stream) and of memory, as
        the catalog words them; an interrupting signal as KeyboardInterrupt."""
        try:
            yield
        except RuntimeError as exc:
            if "interrupted" in str(exc).lower():  # Ctrl-C in the shell (catalog/process.py)
                raise KeyboardInterrupt from None
            raise
        except MemoryError as exc:  # the process's own cap (limits.cap_process_memory)
            raise self._wording(duckdb.OutOfMemoryException(str(exc))) from None
        except duckdb.Error as exc:
            raise self._wording(exc) from None
        except OSError as exc:
            raise self._wording(as_duckdb(exc)) from None

    def _wording(self, exc: duckdb.Error) -> BaseException:
        if isinstance(exc, duckdb.InterruptException) and not self._fired.is_set():
            return KeyboardInterrupt()  # not our deadline: a signal (deadline.stop_all)
        return self._translate(exc, self._text, self._fired.is_set())
