"""Schemas: conforming input, version metadata, older minors, refusing bad files."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from alignflow.artifacts import read_table, schemas, write_table
from alignflow.artifacts.conform import conform
from alignflow.artifacts.parquet_io import iter_batches
from alignflow.artifacts.schemas import TableSchema
from alignflow.errors import SchemaError


def _rollouts(n: int) -> pa.Table:
    return pa.table({
        "iteration": [3] * n, "task_key": ["iter-3/gen"] * n,
        "prompt_id": [f"p{i // 2}" for i in range(n)], "sample_idx": [i % 2 for i in range(n)],
        "response_ids": [[i, i + 1, i + 2][: 1 + i % 3] for i in range(n)],
        "reward": [i * 0.5 for i in range(n)], "finish_reason": ["stop", "length"] * (n // 2),
    })


def test_missing_nullable_columns_become_null_and_types_narrow():
    out = conform(_rollouts(4).append_column("run_id", pa.array(["r"] * 4)), schemas.ROLLOUTS)
    assert out.schema.names == schemas.ROLLOUTS.arrow_schema.names
    assert out.schema.field("response_ids").type == pa.list_(pa.int32())
    assert out.column("kl").null_count == 4
    assert out.column("response_ids").to_pylist() == [[0], [1, 2], [2, 3, 4], [3]]
    assert pa.types.is_dictionary(out.schema.field("finish_reason").type)


@pytest.mark.parametrize(("column", "values", "match"), [
    ("bogus", [1], r"unknown column\(s\) \['bogus'\]"),
    ("reward", ["high"], r"rollouts.reward: got string, expected float"),
    ("iteration", [2**40], r"rollouts.iteration: cannot store int64"),
    ("response_ids", [["a"]], r"rollouts.response_ids: got list<item: string>"),
])
def test_bad_columns_named(column, values, match):
    base = {"run_id": ["r"], "iteration": [1], "task_key": ["k"], "prompt_id": ["p"],
            "sample_idx": [0]}
    with pytest.raises(SchemaError, match=match):
        conform(pa.table(base | {column: values}), schemas.ROLLOUTS)


def test_missing_non_null_column():
    with pytest.raises(SchemaError, match=r"rollouts.prompt_id: missing non-null column"):
        conform(pa.table({"run_id": ["r"], "iteration": [1], "task_key": ["k"],
                          "sample_idx": [0]}), schemas.ROLLOUTS)


def test_file_metadata_and_dictionary_encoding(fast_store):
    ref = write_table(fast_store, "rollouts", _rollouts(6), run_id="r", task="gen",
                      partition={"iter": 3})
    with fast_store.open_file(ref.path) as f:
        meta = pq.ParquetFile(f).metadata
        kv = meta.metadata
        cols = {meta.schema.column(i).name: meta.row_group(0).column(i)
                for i in range(meta.num_columns)}
    assert kv[b"alignflow.schema"] == b"rollouts" and kv[b"alignflow.schema_version"] == b"1.1"
    assert cols["run_id"].compression == "ZSTD"
    assert "RLE_DICTIONARY" in str(cols["finish_reason"].encodings)
    assert "RLE_DICTIONARY" in str(cols["run_id"].encodings)
    assert "RLE_DICTIONARY" not in str(cols["prompt_id"].encodings)
    back = read_table(fast_store, [ref])
    assert back.num_rows == 6 and back.column("reward").to_pylist() == [0, .5, 1, 1.5, 2, 2.5]


def test_streaming_batches_and_iter_batches(fast_store):
    batches = (conform(_rollouts(10).append_column("run_id", pa.array(["r"] * 10)),
                       schemas.ROLLOUTS).to_batches()[0] for _ in range(7))
    ref = write_table(fast_store, "rollouts", batches, run_id="r", task="gen")
    assert ref.rows == 70
    seen = list(iter_batches(fast_store, [ref.to_json()], columns=["sample_idx", "kl"],
                             batch_size=16))
    assert sum(t.num_rows for t in seen) == 70
    assert seen[0].column_names == ["sample_idx", "kl"]


def test_older_minor_reads_with_nulls(fast_store, monkeypatch):
    v10 = TableSchema("toy", "1.0", pa.schema([pa.field("run_id", pa.string(), False),
                                               pa.field("a", pa.int32())]))
    v11 = TableSchema("toy", "1.1", v10.arrow_schema.append(pa.field("b", pa.float32())))
    monkeypatch.setitem(schemas.SCHEMAS, "toy", v10)
    old = write_table(fast_store, "toy", {"a": [1, 2]}, run_id="r", task="t")
    monkeypatch.setitem(schemas.SCHEMAS, "toy", v11)
    new = write_table(fast_store, "toy", {"a": [3], "b": [0.5]}, run_id="r", task="t")
    table = read_table(fast_store, [old, new])
    assert table.column("a").to_pylist() == [1, 2, 3]
    assert table.column("b").to_pylist() == [None, None, 0.5]


def test_unknown_major_and_foreign_file(fast_store):
    table = pa.table({"run_id": ["r"], "task_key": ["k"], "step": [1], "key": ["x"]})
    for name, meta in [("v9", {"alignflow.schema": "metrics",
                               "alignflow.schema_version": "9.1"}), ("plain", None)]:
        with fast_store.fs.open(fast_store.path(f"runs/r/{name}.parquet"), "wb") as f:
            pq.write_table(table.replace_schema_metadata(meta), f)
    with pytest.raises(SchemaError, match=r"runs/r/v9.parquet: schema metrics version 9.1 has "
                                          r"an unknown major version"):
        read_table(fast_store, ["runs/r/v9.parquet"])
    with pytest.raises(SchemaError, match=r"runs/r/plain.parquet: no known alignflow schema"):
        read_table(fast_store, ["runs/r/plain.parquet"])


def test_corrupt_parquet_names_path(fast_store):
    ref = write_table(fast_store, "metrics", {"task_key": ["k"], "step": [1], "key": ["x"]},
                      run_id="r", task="t")
    data = fast_store.read_bytes(ref.path)
    fast_store.write_bytes("runs/r/junk.parquet", b"not parquet at all")
    with pytest.raises(SchemaError, match=r"runs/r/junk.parquet: not a readable Parquet"):
        read_table(fast_store, ["runs/r/junk.parquet"])
    fast_store.write_bytes(ref.path, data[: len(data) // 2])
    with pytest.raises(SchemaError, match=ref.path):
        read_table(fast_store, [ref])
