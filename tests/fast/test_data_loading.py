"""Dataset specs (local files, folders, hub names) and seeded mixing."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from alignflow.errors import ConfigError
from alignflow.tasks.data import load_dataset_spec, mix_datasets


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture()
def two_sets(tmp_path):
    a = _jsonl(tmp_path / "a.jsonl", [{"input": f"a{i}", "label": "A"} for i in range(1000)])
    b = _jsonl(tmp_path / "b.jsonl", [{"input": f"b{i}", "label": "B"} for i in range(1000)])
    return str(a), str(b)


def test_local_formats(tmp_path):
    rows = [{"input": "x", "label": "1"}, {"input": "y", "label": "2"}]
    (tmp_path / "arr.json").write_text(json.dumps(rows))
    _jsonl(tmp_path / "l.jsonl", rows)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p.parquet")
    (tmp_path / "c.csv").write_text("input,label\nx,1\ny,2\n")
    for name in ["arr.json", "l.jsonl", "p.parquet"]:
        ds = load_dataset_spec(str(tmp_path / name))
        assert ds.to_list() == rows, name
    assert load_dataset_spec(str(tmp_path / "c.csv"))["input"] == ["x", "y"]
    with pytest.raises(ConfigError, match=r"files disagree on columns: .*label"):
        load_dataset_spec(str(tmp_path))  # csv infers label as int64, json as string
    (tmp_path / "c.csv").unlink()
    assert len(load_dataset_spec(str(tmp_path))) == 6  # the folder: the three other files


def test_bad_paths_and_hub_names(tmp_path):
    with pytest.raises(ConfigError, match="dataset path .*missing.jsonl' does not exist"):
        load_dataset_spec(str(tmp_path / "missing.jsonl"))
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(ConfigError, match=r"x.txt': expected one of"):
        load_dataset_spec(str(tmp_path / "x.txt"))
    with pytest.raises(ConfigError, match=r"dataset 'nobody-here/no-data' is not alignflow"):
        load_dataset_spec("nobody-here/no-data")


def test_mix_proportions_and_seed(two_sets):
    spec = ",".join(two_sets)
    mixed = mix_datasets(spec, "0.7,0.3", seed=7)
    labels = mixed["label"]
    assert labels.count("A") == 1000  # first_exhausted: stops when A runs out
    share = labels.count("A") / len(labels)
    assert abs(share - 0.7) < 0.03, share
    assert mix_datasets(spec, "0.7,0.3", seed=7)["input"] == mixed["input"]
    assert mix_datasets(spec, "0.7,0.3", seed=8)["input"] != mixed["input"]
    # rows of each source keep their order
    assert [x for x in mixed["input"] if x[0] == "b"] == [f"b{i}" for i in range(labels.count("B"))]


def test_mix_max_samples_and_weights(two_sets):
    mixed = mix_datasets(list(two_sets), [3, 1], seed=1, max_samples=200)
    assert len(mixed) == 200
    assert 0.65 < mixed["label"].count("A") / 200 < 0.85
    single = mix_datasets(two_sets[0], max_samples=5)
    assert single["input"] == ["a0", "a1", "a2", "a3", "a4"]


def test_mix_errors(two_sets, tmp_path):
    spec = ",".join(two_sets)
    with pytest.raises(ConfigError, match=r"dataset_probs '0.5': expected 2 non-negative"):
        mix_datasets(spec, "0.5")
    with pytest.raises(ConfigError, match=r"dataset_probs 'a,b': expected comma-separated"):
        mix_datasets(spec, "a,b")
    other = _jsonl(tmp_path / "o.jsonl", [{"question": "q"}])
    with pytest.raises(ConfigError, match=r"have different columns"):
        mix_datasets(f"{two_sets[0]},{other}", "0.5,0.5")
