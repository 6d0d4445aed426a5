"""A query's result, batch by batch, within the catalog's limits on rows and bytes.

DuckDB streams the last statement's result as Arrow batches (`to_arrow_reader`), so a
caller that writes each batch out as it comes (`alignflow sql --format csv|json|parquet`)
holds one batch at a time, however big the result. Counting stops the query past
`SqlLimits.max_rows` rows or `max_bytes` Arrow bytes, with one line naming the cap and the
flag that raises it. An error DuckDB raises while batches are being read arrives as a plain
`OSError` carrying DuckDB's message; `as_duckdb` gives it back its DuckDB type, so it is
worded like any other (a time limit, the memory limit, the corrupt file it names).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence

import duckdb
import pyarrow as pa

from alignflow.catalog.limits import SqlLimits, human_bytes
from alignflow.errors import QueryLimit

BATCH_ROWS = 65_536
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


def short(text: str) -> str:
    return " ".join(text.split())[:80]


class Rows:
    """The result of the last statement: `schema`, then its batches (iterate once)."""

    def __init__(self, limits: SqlLimits, translate: Translate, fired: threading.Event) -> None:
        self.limits, self._translate, self._fired = limits, translate, fired
        self.rows = self.bytes = 0
        self.started = False  # has a batch been handed out?
        self.schema: pa.Schema | None = None
        self._text, self._reader, self._first = "", None, None

    def start(self, cur: duckdb.DuckDBPyConnection, statements: Sequence[str],
              params: object) -> None:
        """Run the statements before the last for their errors, open the last one's result
        and read its first batch (so errors found early can still be retried)."""
        for i, text in enumerate(statements):
            self._text = text
            with self._errors():
                if i < len(statements) - 1:
                    cur.execute(text).fetchall()  # run for its errors; rows unused
                else:
                    self._reader = cur.sql(text, params=params).to_arrow_reader(BATCH_ROWS)
        self.schema = self._reader.schema
        self._first = self._next()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        batch, self._first = self._first, None
        while batch is not None:
            self.started = True
            yield batch
            batch = self._next()

    def read_all(self) -> pa.Table:
        return pa.Table.from_batches(list(self), schema=self.schema)

    def _next(self) -> pa.RecordBatch | None:
        with self._errors():
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                return None
        self.rows, self.bytes = self.rows + batch.num_rows, self.bytes + batch.nbytes
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
            if "interrupted" in str(exc).lower():  # Ctrl-C, or a signal (catalog/cli.py)
                raise KeyboardInterrupt from None
            raise
        except MemoryError as exc:  # the process's own cap (limits.cap_process_memory)
            raise self._wording(duckdb.OutOfMemoryException(str(exc))) from None
        except duckdb.Error as exc:
            raise self._wording(exc) from None
        except OSError as exc:
            raise self._wording(as_duckdb(exc)) from None

    def _wording(self, exc: duckdb.Error) -> Exception:
        if isinstance(exc, duckdb.InterruptException) and not self._fired.is_set():
            return KeyboardInterrupt()  # not our deadline: Ctrl-C or a signal (Catalog.interrupt)
        return self._translate(exc, self._text, self._fired.is_set())
