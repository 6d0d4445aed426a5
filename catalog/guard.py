"""Read-only guard for user SQL: only statements that read may run.

DuckDB's own parser splits the text and types each statement, so a write hidden after a
`;` or inside a comment trick is seen as what it is. A statement typed SELECT can still
write: DuckDB lets a common table expression hold `INSERT/UPDATE/DELETE ... RETURNING` or
even `COPY ... TO` (which DuckDB's `allowed_paths` would let onto a committed file). So the
parse tree of every SELECT (`json_serialize_sql`) is walked and only reading query nodes
pass; `EXPLAIN [ANALYZE]` is checked on what it explains. The connection is locked down as
well (see `connection.py`): this is the first of two walls.

The guard parses on a private, data-less connection, or (`parsing_on`) on a catalog's own
connection, so a one-query `alignflow sql` starts one DuckDB database, not two (~0.015 CPU s
of a ~0.16 s bare DuckDB process). Parsing and `json_serialize_sql` read no file on any
connection; what binds a query (`duckdb.get_table_names`, which would open a file a table
function names) runs only on the private one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Iterator

import duckdb

from alignflow.errors import ConfigError, SqlRefused

MAX_QUERY_BYTES = 1_000_000
_CACHED_CHARS = 4096
_READING = {duckdb.StatementType.SELECT}
# PIVOT parses as MULTI (it may create an enum type first); allowed only when it reads.
_MULTI_HEADS = {"pivot", "unpivot", "pivot_wider", "pivot_longer", "with", "from", "select"}
_READ_NODES = {"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"}
# keywords that mean a data-modifying clause where no parse tree is available (PIVOT)
_WRITE_WORDS = {"insert", "update", "delete", "merge", "copy"}
_SQL_IN_STRING = {"query"}  # table functions that run SQL given as text
_MAX_EXPLAIN_SKIP = 12

_parser_lock = threading.RLock()
_parser: duckdb.DuckDBPyConnection | None = None
_on = threading.local()  # `parsing_on`: this thread's catalog connection to parse with


@contextlib.contextmanager
def parsing_on(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Within the block, this thread parses with `con` (a catalog's cursor or its connection
    before any view exists) instead of the private connection; nothing is bound on it."""
    before = getattr(_on, "con", None)
    _on.con = con
    try:
        yield
    finally:
        _on.con = before


def _short(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def _keywords(text: str) -> list[str]:
    """Lower-case keyword tokens of `text`; strings and comments are skipped."""
    tokens = duckdb.tokenize(text)
    out = []
    for i, (pos, kind) in enumerate(tokens):
        if kind == duckdb.token_type.keyword:
            end = tokens[i + 1][0] if i + 1 < len(tokens) else len(text)
            out.append(text[pos:end].strip().lower())
    return out


def identifiers(text: str) -> set[str]:
    """Lower-case identifier tokens of `text` (table and column names, unquoted)."""
    tokens = duckdb.tokenize(text)
    out = set()
    for i, (pos, kind) in enumerate(tokens):
        if kind == duckdb.token_type.identifier:
            end = tokens[i + 1][0] if i + 1 < len(tokens) else len(text)
            out.add(text[pos:end].strip().strip('"').lower())
    return out


def tables_named(query: str) -> set[str] | None:
    """Lower-case names of the tables and views `query` reads (DuckDB's own parser, on the
    guard's private connection that reads no file); None when they cannot be told."""
    if len(query.encode("utf-8", "replace")) > MAX_QUERY_BYTES:
        return None  # the guard refuses it, in its own words
    try:
        names: set[str] = set()
        for statement in statements(query):
            found = _named(statement.query)
            if found is None:
                return None
            names |= {name.lower() for name in found}
        return names
    except (duckdb.Error, ValueError, TypeError, RuntimeError):
        return None


def _named(text: str) -> set[str] | None:
    """Tables one statement reads: `duckdb.get_table_names`, or where that binds and fails
    (`JOIN ... USING` on a connection without the tables) the base tables of its parse tree
    less its CTEs; None when a `query()` hides some. Under `parsing_on`, the parse tree only:
    binding there could open a file the text names (that connection is not locked yet)."""
    if getattr(_on, "con", None) is None:
        con = scratch()  # a cursor of its own: a failed call leaves its transaction aborted
        try:
            return duckdb.get_table_names(text, connection=con)
        except duckdb.BinderException:
            pass
        finally:
            con.close()
    tree = _parse_tree(text)
    if tree.get("error") or "QUERY()" in _node_types(tree):
        return None
    names, ctes, stack = set(), set(), [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "BASE_TABLE":
                names.add(str(node.get("table_name")))
            ctes |= {str(c.get("key")) for c in (node.get("cte_map") or {}).get("map", [])}
            stack += node.values()
        elif isinstance(node, list):
            stack += node
    return names - ctes


def _parser_connection() -> duckdb.DuckDBPyConnection:
    """The guard's private, data-less connection (under `_parser_lock`)."""
    global _parser
    if _parser is None:
        _parser = duckdb.connect(":memory:", config={"enable_external_access": False})
    return _parser


def scratch() -> duckdb.DuckDBPyConnection:
    """A cursor of the private, data-less connection (no file access), its transaction its
    own: for work that needs a connection but no store, without a database of its own."""
    with _parser_lock:
        return _parser_connection().cursor()


def statements(text: str) -> list[duckdb.Statement]:
    """DuckDB's split of `text` into statements, on the private connection: the module's
    `duckdb.extract_statements` starts DuckDB's default database, one more instance per
    process (~0.04 CPU s each)."""
    if (con := getattr(_on, "con", None)) is not None:
        return con.extract_statements(text)
    with _parser_lock:
        return _parser_connection().extract_statements(text)


def _parse_tree(text: str) -> dict:
    """DuckDB's JSON parse tree of one SELECT statement (parsed, never run or bound)."""
    if (con := getattr(_on, "con", None)) is None:
        with _parser_lock:
            return _tree(_parser_connection(), text)
    return _tree(con, text)


def _tree(con: duckdb.DuckDBPyConnection, text: str) -> dict:
    rows = con.execute("SELECT json_serialize_sql(?)", [text]).fetchall()  # and done with
    return json.loads(rows[0][0]) if rows else {"error": True}


def _node_types(tree: object) -> set[str]:
    """Every query node type (`SELECT_NODE`, `INSERT_QUERY_NODE`, ...) in a parse tree, and
    `query()` calls (their SQL is a string the guard cannot see into) as `QUERY()`."""
    found: set[str] = set()
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            kind = item.get("type")
            if isinstance(kind, str) and kind.endswith("_NODE"):
                found.add(kind)
            if str(item.get("function_name", "")).lower() in _SQL_IN_STRING:
                found.add(f"{item['function_name'].upper()}()")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _writes_inside(text: str) -> str | None:
    """What makes a reading statement write (a DML or COPY common table expression), or
    could (`query()` runs SQL from a string)."""
    if not (set(_keywords(text)) | identifiers(text)) & (_WRITE_WORDS | _SQL_IN_STRING):
        return None  # no such node without its keyword: skip the parse tree (~1 ms)
    tree = _parse_tree(text)
    if not tree.get("error"):
        bad = sorted(_node_types(tree) - _READ_NODES)
        return bad[0].removesuffix("_QUERY_NODE").removesuffix("_NODE") if bad else None
    words = set(_keywords(text)) & _WRITE_WORDS  # no tree (PIVOT): any writing keyword
    return min(words).upper() if words else None


def _explained(text: str) -> str | None:
    """The statement an EXPLAIN [ANALYZE] [(options)] wraps: the first token suffix that parses."""
    tokens = duckdb.tokenize(text)
    for pos, _kind in tokens[1 : 1 + _MAX_EXPLAIN_SKIP]:
        try:
            inner = statements(text[pos:])
        except duckdb.Error:
            continue
        if len(inner) == 1:
            return inner[0].query
    return None


def _check_one(stmt: duckdb.Statement, text: str) -> None:
    kind = stmt.type
    if kind == duckdb.StatementType.EXPLAIN:
        inner = _explained(text)
        if inner is None:
            raise SqlRefused(f"SQL refused: cannot tell what `{_short(text)}` explains")
        _check_one(statements(inner)[0], inner)
        return
    words = _keywords(text)
    head = words[0] if words else ""
    if kind not in _READING and not (kind == duckdb.StatementType.MULTI and head in _MULTI_HEADS):
        name = head.upper() or kind.name
        raise SqlRefused(
            f"SQL refused: {name} statement `{_short(text)}`; only reading statements "
            "(SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, PIVOT, EXPLAIN) may run"
        )
    clause = _writes_inside(text)
    if clause and clause.endswith("()"):
        raise SqlRefused(f"SQL refused: `{_short(text)}` calls {clause.lower()}, whose SQL text "
                         "the read-only guard cannot check; write that query directly")
    if clause:
        raise SqlRefused(f"SQL refused: `{_short(text)}` contains {clause}, which writes; "
                         "the catalog is read-only")


def check_read_only(query: str, max_bytes: int = MAX_QUERY_BYTES) -> list[str]:
    """Split `query` into statements and return their texts; raise if any would not just read.

    A text over `max_bytes` is refused before it is parsed (parsing is not free either)."""
    size = len(query.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise SqlRefused(f"SQL refused: the query text is {size:,} bytes; the limit is "
                         f"{max_bytes:,} bytes (query the views instead of inlining data)")
    if len(query) > _CACHED_CHARS:  # a long text is checked, not kept
        return list(_checked.__wrapped__(query))
    return list(_checked(query))


@functools.lru_cache(maxsize=256)
def _checked(query: str) -> tuple[str, ...]:
    """The statements of a query that passed (a repeated query is checked once; a refusal
    raises, so it is never cached)."""
    try:
        parsed = statements(query)
    except duckdb.Error as exc:
        raise ConfigError(f"bad SQL `{_short(query)}`: {_first_line(exc)}") from None
    if not parsed:
        raise ConfigError("empty SQL: expected a statement such as `SELECT * FROM runs`")
    texts = []
    for stmt in parsed:
        text = stmt.query.strip().rstrip(";").strip()
        _check_one(stmt, text)
        texts.append(text)
    return tuple(texts)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
