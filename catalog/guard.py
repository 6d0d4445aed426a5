"""Read-only guard for user SQL: only statements that read may run.

DuckDB's own parser splits the text and types each statement, so a write hidden after a
`;` or inside a comment trick is seen as what it is. Two readers need a closer look:
`EXPLAIN ANALYZE` runs the statement it explains, and DuckDB 2 lets a `WITH` clause hold
`INSERT/UPDATE/DELETE ... RETURNING`; both are checked through the token stream. The
connection is locked down as well (see `connection.py`), so this is the first of two walls.
"""

from __future__ import annotations

import duckdb

from alignflow.errors import ConfigError, SqlRefused

_READING = {duckdb.StatementType.SELECT}
# PIVOT parses as MULTI (it may create an enum type first); allowed only when it reads.
_MULTI_HEADS = {"pivot", "unpivot", "pivot_wider", "pivot_longer", "with", "from", "select"}
# keyword pairs that mean a data-modifying clause inside a reading statement
_WRITE_PAIRS = {("insert", "into"), ("insert", "or"), ("delete", "from"), ("merge", "into")}
_MAX_EXPLAIN_SKIP = 12


def _short(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def _keywords(text: str) -> list[tuple[int, str]]:
    """(position, lower-case word) of each keyword token; strings and comments are skipped."""
    tokens = duckdb.tokenize(text)
    out = []
    for i, (pos, kind) in enumerate(tokens):
        if kind == duckdb.token_type.keyword:
            end = tokens[i + 1][0] if i + 1 < len(tokens) else len(text)
            out.append((pos, text[pos:end].strip().lower()))
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


def _writes_inside(text: str) -> str | None:
    """The keyword that makes a reading statement write (a DML common table expression)."""
    words = [w for _, w in _keywords(text)]
    for i, (a, b) in enumerate(zip(words, [*words[1:], ""], strict=True)):
        if (a, b) in _WRITE_PAIRS:
            return f"{a.upper()} {b.upper()}"
        if a == "update" and "set" in words[i + 1 :]:
            return "UPDATE ... SET"
    return None


def _explained(text: str) -> str | None:
    """The statement an EXPLAIN [ANALYZE] [(options)] wraps: the first token suffix that parses."""
    tokens = duckdb.tokenize(text)
    for pos, _kind in tokens[1 : 1 + _MAX_EXPLAIN_SKIP]:
        try:
            inner = duckdb.extract_statements(text[pos:])
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
        _check_one(duckdb.extract_statements(inner)[0], inner)
        return
    words = _keywords(text)
    head = words[0][1] if words else ""
    if kind not in _READING and not (kind == duckdb.StatementType.MULTI and head in _MULTI_HEADS):
        name = head.upper() or kind.name
        raise SqlRefused(
            f"SQL refused: {name} statement `{_short(text)}`; only reading statements "
            "(SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, PIVOT, EXPLAIN) may run"
        )
    clause = _writes_inside(text)
    if clause:
        raise SqlRefused(f"SQL refused: `{_short(text)}` contains {clause}, which writes; "
                         "the catalog is read-only")


def check_read_only(query: str) -> list[str]:
    """Split `query` into statements and return their texts; raise if any would not just read."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise ConfigError(f"bad SQL `{_short(query)}`: {_first_line(exc)}") from None
    if not statements:
        raise ConfigError("empty SQL: expected a statement such as `SELECT * FROM runs`")
    texts = []
    for stmt in statements:
        text = stmt.query.strip().rstrip(";").strip()
        _check_one(stmt, text)
        texts.append(text)
    return texts


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
