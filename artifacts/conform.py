"""Make incoming Arrow data match a `TableSchema`, or say exactly which column is wrong.

Writers may leave out nullable columns (filled with nulls) and may hand over the natural
Python-inferred types (int64, double, plain string) where the schema is narrower: those are
cast within their kind (int → int, number → float, string → dictionary string, list → list).
Anything else — an unknown column, a string where a number belongs, an int overflow — is a
`SchemaError` naming the column.
"""

from __future__ import annotations

from typing import TypeAlias

import pyarrow as pa

from alignflow.artifacts.schemas import TableSchema
from alignflow.errors import SchemaError

Data: TypeAlias = "pa.Table | pa.RecordBatch"


def _kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return "list"
    return str(t)


def compatible(src: pa.DataType, dst: pa.DataType) -> bool:
    """True if values of `src` may be cast to `dst` without changing their meaning."""
    if src == dst or pa.types.is_null(src):
        return True
    s, d = _kind(src), _kind(dst)
    if s == "list" and d == "list":
        return compatible(src.value_type, dst.value_type)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return compatible(src.key_type, dst.key_type) and compatible(src.item_type, dst.item_type)
    return s == d or (s == "int" and d == "float")


def _column(data: Data, field: pa.Field, schema: TableSchema) -> pa.Array | pa.ChunkedArray:
    col = data.column(field.name)
    if not compatible(col.type, field.type):
        raise SchemaError(f"{schema.name}.{field.name}: got {col.type}, expected {field.type}")
    if col.type == field.type:
        out = col
    else:
        try:
            out = col.cast(field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaError(f"{schema.name}.{field.name}: cannot store {col.type} values as "
                              f"{field.type}: {exc}") from None
    if not field.nullable and out.null_count:
        raise SchemaError(f"{schema.name}.{field.name}: {out.null_count} nulls in a non-null "
                          "column")
    return out


def conform(data: Data, schema: TableSchema, fill: dict[str, object] | None = None) -> Data:
    """`data` with exactly `schema`'s columns, order and types (plus its metadata).

    `fill` gives constants for absent columns (e.g. run_id, task_key)."""
    fill = fill or {}
    names = set(data.schema.names)
    unknown = [n for n in data.schema.names if schema.arrow_schema.get_field_index(n) < 0]
    if unknown:
        raise SchemaError(f"{schema.name}: unknown column(s) {unknown}; expected columns of "
                          f"{schema.name} {schema.version}: {schema.arrow_schema.names}")
    arrays = []
    for field in schema.arrow_schema:
        if field.name in names:
            arrays.append(_column(data, field, schema))
        elif field.name in fill:
            arrays.append(pa.array([fill[field.name]] * data.num_rows, field.type))
        elif field.nullable:
            arrays.append(pa.nulls(data.num_rows, field.type))
        else:
            raise SchemaError(f"{schema.name}.{field.name}: missing non-null column")
    cls = pa.Table if isinstance(data, pa.Table) else pa.RecordBatch
    return cls.from_arrays(arrays, schema=schema.with_metadata())
