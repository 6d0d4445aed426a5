"""Versioned Arrow schemas of the tables alignflow commits.

Versions are "MAJOR.MINOR": a MINOR bump only adds nullable columns, so an older file reads
under the newer schema with nulls; a MAJOR bump is a break, and a reader that does not know
the major version refuses the file. Name and version travel in every Parquet file's
key-value metadata (`alignflow.schema`, `alignflow.schema_version`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

META_NAME = b"alignflow.schema"
META_VERSION = b"alignflow.schema_version"

# String columns whose values repeat across rows: dictionary-encoded in Parquet.
REPEATED_STRINGS = frozenset({"run_id", "task_key", "finish_reason", "key", "split", "kind",
                              "label"})


def _f(name: str, type_: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


@dataclass(frozen=True)
class TableSchema:
    """A named, versioned Arrow schema."""

    name: str
    version: str
    arrow_schema: pa.Schema = field(repr=False)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def metadata(self) -> dict[bytes, bytes]:
        return {META_NAME: self.name.encode(), META_VERSION: self.version.encode()}

    def with_metadata(self) -> pa.Schema:
        return self.arrow_schema.with_metadata(self.metadata)

    @property
    def dictionary_columns(self) -> list[str]:
        """Columns Parquet should dictionary-encode (repeated strings only)."""
        return [f.name for f in self.arrow_schema
                if f.name in REPEATED_STRINGS or pa.types.is_dictionary(f.type)]


_I32_LIST = pa.list_(pa.int32())
_F32_LIST = pa.list_(pa.float32())

# 1.1: version_spans (asynchronous runs: which policy version sampled which tokens), and
# action_mask / turns (multi-turn agent episodes: only policy tokens carry loss)
_SPAN = pa.struct([pa.field("start", pa.int32()), pa.field("version", pa.int32())])

ROLLOUTS = TableSchema("rollouts", "1.1", pa.schema([
    _f("run_id", pa.string(), False),
    _f("iteration", pa.int32(), False),
    _f("task_key", pa.string(), False),
    _f("prompt_id", pa.string(), False),
    _f("sample_idx", pa.int32(), False),
    _f("prompt", pa.string()),
    _f("response", pa.string()),
    _f("prompt_ids", _I32_LIST),
    _f("response_ids", _I32_LIST),
    _f("behaviour_logprobs", _F32_LIST),
    _f("ref_logprobs", _F32_LIST),
    _f("values", _F32_LIST),
    _f("reward", pa.float32()),
    _f("scores", pa.map_(pa.string(), pa.float32())),
    _f("advantages", _F32_LIST),
    _f("returns", _F32_LIST),
    _f("kl", pa.float32()),
    _f("prompt_len", pa.int32()),
    _f("response_len", pa.int32()),
    _f("finish_reason", pa.dictionary(pa.int32(), pa.string())),
    _f("policy_version", pa.int32()),
    _f("label", pa.string()),
    _f("round", pa.int32()),
    _f("version_spans", pa.list_(_SPAN)),
    _f("action_mask", pa.list_(pa.int8())),
    _f("turns", pa.int32()),
]))

PREFERENCES = TableSchema("preferences", "1.0", pa.schema([
    _f("run_id", pa.string(), False),
    _f("round", pa.int32()),
    _f("step", pa.int32()),
    _f("task_key", pa.string(), False),
    _f("pair_id", pa.string(), False),
    _f("prompt", pa.string()),
    _f("chosen", pa.string()),
    _f("rejected", pa.string()),
    _f("chosen_score", pa.float32()),
    _f("rejected_score", pa.float32()),
    _f("margin", pa.float32()),
    _f("loss", pa.float32()),
    _f("split", pa.string()),
]))

SFT_SAMPLES = TableSchema("sft_samples", "1.0", pa.schema([
    _f("run_id", pa.string(), False),
    _f("step", pa.int32()),
    _f("task_key", pa.string(), False),
    _f("sample_id", pa.string(), False),
    _f("prompt", pa.string()),
    _f("response", pa.string()),
    _f("n_tokens", pa.int32()),
    _f("loss", pa.float32()),
    _f("truncated", pa.bool_()),
]))

METRICS = TableSchema("metrics", "1.0", pa.schema([
    _f("run_id", pa.string(), False),
    _f("task_key", pa.string(), False),
    _f("step", pa.int64(), False),
    _f("key", pa.string(), False),
    _f("value", pa.float64()),
    _f("ts", pa.float64()),
]))

CHECKPOINTS = TableSchema("checkpoints", "1.0", pa.schema([
    _f("run_id", pa.string(), False),
    _f("task_key", pa.string(), False),
    _f("step", pa.int64(), False),
    _f("path", pa.string(), False),
    _f("kind", pa.string()),
    _f("policy_version", pa.int32()),
    _f("bytes", pa.int64()),
    _f("ts", pa.float64()),
]))

SCHEMAS: dict[str, TableSchema] = {s.name: s for s in
                                   (ROLLOUTS, PREFERENCES, SFT_SAMPLES, METRICS, CHECKPOINTS)}


def get(name: str) -> TableSchema:
    """The schema registered as `name` (tables are written by name)."""
    from alignflow.errors import SchemaError

    try:
        return SCHEMAS[name]
    except KeyError:
        raise SchemaError(f"unknown table {name!r}; expected one of {sorted(SCHEMAS)}") from None


def register(schema: TableSchema) -> TableSchema:
    """Add a table schema (a step's own table); re-registering needs the same or newer version."""
    from alignflow.errors import SchemaError

    old = SCHEMAS.get(schema.name)
    if old is not None and _version_key(schema.version) < _version_key(old.version):
        raise SchemaError(f"schema {schema.name!r} {schema.version} is older than the registered "
                          f"{old.version}")
    SCHEMAS[schema.name] = schema
    return schema


def _version_key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)
