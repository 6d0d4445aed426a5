"""The catalog's local index keeps each distinct list of column names once (`shapes`), the
files naming theirs by number (issue 46: at 10,000 files of one table the 10,000 copies were
half the index, parsed at every `alignflow sql`). A number that names no list, or a `shapes`
that is not a list of lists, is a fact the index does not have: the footer is checked again."""

from __future__ import annotations

import json

import pytest

from alignflow.catalog import index, shape
from tests.fast import test_catalog_index

store = test_catalog_index.store  # the same populated store fixture
_rows = test_catalog_index._rows


def _doc(store) -> tuple[str, dict]:
    path = index.load(store.url).path
    with open(path) as f:
        return path, json.load(f)


def test_each_list_of_column_names_is_kept_once(store):
    _rows(store)
    _, doc = _doc(store)
    columns = [facts["columns"] for _, facts in doc["entries"].values() if "columns" in facts]
    assert len(columns) >= 4  # populate: several files per table, one schema per table
    assert all(isinstance(n, int) and 0 <= n < len(doc["shapes"]) for _, n in columns)
    assert len(doc["shapes"]) < len(columns)
    assert all(isinstance(names, list) and all(isinstance(n, str) for n in names)
               for names in doc["shapes"])
    assert any("reward" in names for names in doc["shapes"])


@pytest.mark.parametrize("tamper", ["not a list", "numbers past the end", "lists of numbers",
                                    "a boolean as the number"])
def test_a_tampered_shape_is_checked_again(store, monkeypatch, tamper):
    first = _rows(store)
    path, doc = _doc(store)
    doc["summaries"] = {}  # else the table's summary spares every per-file check
    if tamper == "not a list":
        doc["shapes"] = {"0": ["reward"]}
    elif tamper == "lists of numbers":
        doc["shapes"] = [[1, 2, 3] for _ in doc["shapes"]]
    for _, facts in doc["entries"].values():
        if "columns" in facts and tamper == "numbers past the end":
            facts["columns"][1] = len(doc["shapes"]) + 5
        if "columns" in facts and tamper == "a boolean as the number":
            facts["columns"][1] = False
    with open(path, "w") as f:
        json.dump(doc, f)
    read: list[str] = []
    real = shape._columns

    def columns(store_, con, rels):
        read.extend(rels)
        return real(store_, con, rels)

    monkeypatch.setattr(shape, "_columns", columns)
    assert _rows(store) == first
    assert len(read) >= 4  # every file's columns read from its footer again
    read.clear()
    assert _rows(store) == first and read == []  # and kept right for the next opening
