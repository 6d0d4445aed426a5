"""Records are journalled by registered name (issue 45): a new store names no module, its
resume never reads the table of moved modules, an older store's module paths are read
through that table once, and a name nothing registered is refused without an import."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from alignflow.artifacts import journal as allow_list
from alignflow.artifacts.parquet_io import ArtifactRef
from alignflow.errors import FlowError, TaskFailed
from alignflow.flows.control import api
from alignflow.flows.engine import TaskError, flow, task
from alignflow.flows.journal import codec, legacy_names, names
from alignflow.tasks.modeling.lora import LoraConfig
from alignflow.tasks.steps.records import StepOutput

REF = ArtifactRef("metrics", "runs/r/metrics/x.parquet", 3, "metrics", "1.0", 100)


@task
def first() -> ArtifactRef:
    return REF


@task
def second(folder: str) -> TaskError:
    if (Path(folder) / "fail").exists():
        raise ValueError("planned failure")
    return TaskError("first-0", "ValueError", "kept", "user")


@flow
def records(cfg: dict) -> list:
    return [first(), second(cfg["dir"])]


class _Untouchable(dict):
    """The moved-modules table, booby-trapped: reading it fails the test."""

    def get(self, *args):  # type: ignore[override]
        raise AssertionError("the resume of a new store read MOVED_MODULES")

    __getitem__ = __contains__ = get


def _tags(value) -> list[str]:
    if isinstance(value, list):
        return [t for v in value for t in _tags(v)]
    if not isinstance(value, dict):
        return []
    own = [value["__type__"]] if isinstance(value.get("__type__"), str) else []
    return own + [t for v in value.values() for t in _tags(v)]


def test_alignflow_records_have_registered_names():
    assert codec.type_name(StepOutput) == "alignflow.StepOutput"
    assert codec.encode(REF)["__type__"] == "alignflow.ArtifactRef"
    assert codec.decode(codec.encode(REF)) == REF


def test_a_new_store_names_no_module_and_resumes_without_the_table(local_store, tmp_path,
                                                                   monkeypatch):
    (tmp_path / "fail").write_text("")
    with pytest.raises(TaskFailed, match="planned failure"):
        api.run(records, {"dir": str(tmp_path)}, store=local_store, run_id="r",
                executor="inline")
    tags = [t for rel in local_store.list("runs/r", "*.json")
            for t in _tags(json.loads(local_store.read_bytes(rel)))]
    assert "alignflow.ArtifactRef" in tags and not [t for t in tags if ":" in t]
    (tmp_path / "fail").unlink()
    monkeypatch.setattr(legacy_names, "MOVED_MODULES", _Untouchable(legacy_names.MOVED_MODULES))
    out = api.resume("r", store=local_store, executor="inline")
    assert out == [REF, TaskError("first-0", "ValueError", "kept", "user")]
    assert api.get_metadata("r", store=local_store)["replayed"] == 1


@pytest.mark.parametrize("old,cls", [
    ("alignflow.tasks.steps.records:StepOutput", StepOutput),  # never moved
    ("alignflow.tasks.rl.records:StepOutput", StepOutput),  # its module moved
    ("alignflow.tasks.trainers.ds_section:LoraSection", LoraConfig),  # moved and renamed
    ("alignflow.flows.engine:TaskError", TaskError),
])
def test_an_older_journal_module_path_is_read_through_the_table(old, cls):
    assert codec.current_name(old) == codec.type_name(cls)
    assert codec.lookup_type(old) is cls


@pytest.mark.parametrize("name", ["alignflow.NoSuchRecord", "os:system",
                                  "alignflow.tasks.never_written:X", "h7_never_imported:X"])
def test_an_unknown_name_is_refused_in_one_line_unimported(name):
    before = set(sys.modules)
    with pytest.raises(FlowError) as err:
        codec.decode({"__type__": name, "fields": {}}, "runs/r/tasks/x.json")
    message = str(err.value)
    assert message.startswith(f"runs/r/tasks/x.json: journal record type {name!r} is not "
                              "registered") and "\n" not in message
    assert not {m for m in set(sys.modules) - before if "never" in m}


def test_two_classes_under_one_name_are_refused(monkeypatch):
    monkeypatch.setattr(allow_list, "_RECORDS", dict(allow_list._RECORDS))
    made = []
    for module in ("alignflow.h7_a", "alignflow.h7_b"):
        cls = dataclasses.make_dataclass("Clash", [("x", int)])
        cls.__module__ = module
        allow_list.journal_record(cls)  # allowed under its module path, as tasks/ do
        made.append(cls)
    with pytest.raises(FlowError, match=r"two journal record classes are named "
                                        r"'alignflow\.Clash'.*alignflow\.h7_a:Clash"):
        names.find("alignflow.Clash")
    del allow_list._RECORDS["alignflow.h7_b:Clash"]
    with pytest.raises(FlowError, match="'alignflow.Clash' is taken by alignflow.h7_a:Clash"):
        codec.register_type(made[1], "alignflow.Clash")  # a name given: checked at once


def test_a_renamed_class_keeps_the_name_it_is_given(monkeypatch):
    monkeypatch.setattr(allow_list, "_RECORDS", dict(allow_list._RECORDS))
    monkeypatch.setattr(names, "_GIVEN", {})
    cls = dataclasses.make_dataclass("NewName", [("x", int)])
    cls.__module__ = "alignflow.h7_c"
    codec.register_type(cls, "alignflow.OldName")
    assert codec.encode(cls(1)) == {"__type__": "alignflow.OldName", "fields": {"x": 1}}
    assert codec.decode({"__type__": "alignflow.OldName", "fields": {"x": 2}}) == cls(2)


def test_every_alignflow_record_has_one_name():
    """alignflow's record modules imported, every allowed class answers to one name only."""
    codec.lookup_type("alignflow.ArtifactRef")  # imports the fixed list of record modules
    index = names._index()
    assert all(names.find(name) is cls for name, cls in index.items())
    assert not [n for n in index if n.startswith("alignflow.") and ":" in n]
