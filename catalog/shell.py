"""The interactive SQL shell of `alignflow sql` with no query.

Statements end with `;` and may span lines; dot-commands take one line. An error prints
one line and the shell goes on; the exit status then says that something failed (for
statements piped in: `echo "SELECT ...;" | alignflow sql`). A file the catalog had to leave
out is named once, as a warning. History lives in the user cache directory.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import IO

from alignflow.catalog.catalog import Catalog
from alignflow.catalog.output import FORMATS, Format, to_text
from alignflow.errors import AlignflowError

HELP = """\
Statements end with ';' and may span lines. Only reading SQL runs (SELECT, WITH, FROM,
DESCRIBE, SHOW, SUMMARIZE, PIVOT, EXPLAIN).
  .tables            list the views
  .schema [VIEW]     columns and types of one view (or all)
  .format FORMAT     table (default), csv or json
  .refresh           re-scan the store for newly committed data
  .help              this text
  .quit / .exit      leave (Ctrl-D works too)
"""
_SCHEMA_SQL = """
SELECT table_name AS view, column_name AS column, data_type AS type
FROM information_schema.columns
WHERE NOT starts_with(table_name, '_af_') AND ($1 IS NULL OR table_name = $1)
ORDER BY table_name, ordinal_position"""


class Shell:
    """A read-eval-print loop over one catalog."""

    def __init__(self, catalog: Catalog, out: IO[str] | None = None) -> None:
        self.catalog = catalog
        self.out = out or sys.stdout
        self.format: Format = "table"
        self._pending = ""  # a statement still waiting for its ';'
        self.exit_code = 0  # 2 after a refused or failed statement (1: a system error)
        self._warned: set[str] = set()

    def loop(self, lines: IO[str] | None = None) -> int:
        """Read from `lines` (default: the terminal, with history) until EOF or `.quit`."""
        interactive = lines is None and sys.stdin.isatty()
        if interactive:
            _enable_history()
            self.out.write(f"alignflow sql on {self.catalog.store.url}; .help for help\n")
        self._pending = ""
        self._warn()
        limit = self.catalog.limits.max_query_bytes
        for line in _read_lines(lines, interactive, lambda: bool(self._pending)):
            if not self._pending and line.strip().startswith("."):
                if not self.command(line.strip()):
                    break
                continue
            self._pending += line + "\n"
            if self._pending.rstrip().endswith(";") or len(self._pending) > limit:
                self.query(self._pending)  # an endless statement is refused by its size
                self._pending = ""
        if self._pending.strip():
            self.query(self._pending)
        return self.exit_code

    def query(self, text: str, params: list | None = None) -> None:
        try:
            self.out.write(to_text(self.catalog.sql(text, params), self.format))
        except AlignflowError as exc:
            self._error(str(exc), 2 if exc.kind == "user" else 1)
        except Exception as exc:  # a shell never dies on one bad statement
            self._error(f"{type(exc).__name__}: {exc}", 1)
        self._warn()

    def command(self, line: str) -> bool:
        """Run one dot-command; False means leave."""
        word, _, arg = line.partition(" ")
        arg = arg.strip()
        if word in (".quit", ".exit", ".q"):
            return False
        if word == ".help":
            self.out.write(HELP)
        elif word == ".tables":
            self.out.write("  ".join(self.catalog.tables()) + "\n")
        elif word == ".schema":
            self.query(_SCHEMA_SQL, [arg or None])
        elif word == ".format" and arg in FORMATS and arg != "parquet":
            self.format = arg  # type: ignore[assignment]
        elif word == ".refresh":
            self.catalog.refresh()
            self._warn()
        else:
            self._error(f"unknown command {line!r}; .help lists the commands", 2)
        return True

    def _error(self, message: str, code: int) -> None:
        self.exit_code = self.exit_code or code
        self.out.write(f"error: {message.splitlines()[0] if message else 'failed'}\n")
        self.out.flush()

    def _warn(self) -> None:
        """Name each file the catalog left out, the first time it is seen."""
        for problem in self.catalog.problems:
            if problem.message not in self._warned:
                self._warned.add(problem.message)
                self.out.write(f"warning: {problem.message}\n")


def _read_lines(lines: IO[str] | None, interactive: bool, continuing):
    """Lines from a stream, or from `input()` with a prompt when on a terminal."""
    if lines is not None or not interactive:
        for line in lines if lines is not None else sys.stdin:
            yield line.rstrip("\n")
        return
    while True:
        try:
            yield input("   -> " if continuing() else "sql> ")
        except EOFError:
            print()
            return
        except KeyboardInterrupt:
            print("^C")


def _enable_history() -> None:
    """readline line editing plus a history file in the user cache directory."""
    try:
        import readline
    except ImportError:  # pragma: no cover - no readline on this platform
        return
    import atexit

    from platformdirs import user_cache_dir

    folder = user_cache_dir("alignflow")
    path = os.path.join(folder, "sql_history")
    with contextlib.suppress(OSError):
        os.makedirs(folder, exist_ok=True)
        readline.read_history_file(path)
    readline.set_history_length(1000)
    atexit.register(_save_history, readline, path)


def _save_history(readline, path: str) -> None:
    with contextlib.suppress(OSError):
        readline.write_history_file(path)
