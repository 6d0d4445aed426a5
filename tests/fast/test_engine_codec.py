"""The journal codec and stable identities (no store, no Ray)."""

from __future__ import annotations

import dataclasses

import pydantic
import pytest

from alignflow.artifacts.parquet_io import ArtifactRef
from alignflow.errors import FlowError
from alignflow.flows.engine import TaskError
from alignflow.flows.journal import codec
from alignflow.flows.journal.identity import cache_key, new_run_id, task_seed


@codec.register_type
@dataclasses.dataclass(frozen=True)
class Inner:
    a: int
    b: tuple


@codec.register_type
@dataclasses.dataclass(frozen=True)
class Outer:
    inner: Inner
    refs: list
    meta: dict


@codec.register_type
class Model(pydantic.BaseModel):
    name: str
    score: float


def test_dataclasses_round_trip_through_json():
    ref = ArtifactRef("metrics", "runs/r/metrics/x.parquet", 3, "metrics", "1.0", 100)
    rec = Outer(Inner(1, (2, "x")), [ref, None, 1.5], {"__type__": "not a tag", "k": [1, 2]})
    text = codec.dumps(rec)
    assert "pickle" not in text
    back = codec.decode(__import__("json").loads(text))
    assert back == rec
    assert isinstance(back.inner.b, tuple)
    assert isinstance(back.refs[0], ArtifactRef)


def test_pydantic_and_task_error_round_trip():
    m = Model(name="rm", score=0.25)
    assert codec.decode(codec.encode(m)) == m
    err = TaskError("iter-0001/gen", "ValueError", "bad", "user")
    assert codec.decode(codec.encode(err)) == err


def test_unjournalable_values_are_refused_with_a_clear_message():
    with pytest.raises(FlowError, match="cannot journal a set"):
        codec.encode({1, 2})
    with pytest.raises(FlowError, match="non-string key 1"):
        codec.encode({1: "a"})


def test_unknown_type_names_fail_without_importing():
    with pytest.raises(FlowError, match="not registered"):
        codec.decode({"__type__": "os:system", "fields": {}})
    with pytest.raises(FlowError, match="not registered"):
        codec.decode({"__type__": "some_module_never_imported:X", "fields": {}})


def test_only_registered_types_are_rebuilt_even_when_imported():
    """A store may name any class of an imported module (subprocess:Popen, a dataclass the
    process happens to know): only the allow-list is rebuilt, and the error names the file."""
    popen = {"__type__": "subprocess:Popen", "fields": {"args": "true", "shell": True}}
    with pytest.raises(FlowError, match=r"^runs/r/tasks/x.json: journal record type "
                                        r"'subprocess:Popen' is not registered"):
        codec.decode({"out": popen}, "runs/r/tasks/x.json")

    @dataclasses.dataclass(frozen=True)
    class Unlisted:
        x: int
    with pytest.raises(FlowError, match="not registered"):
        codec.decode(codec.encode(Unlisted(1)))
    with pytest.raises(FlowError, match="does not fit its class"):
        codec.decode({"__type__": codec.type_name(Inner), "fields": {"zzz": 1}})


def test_digest_is_canonical():
    assert codec.digest({"b": 1, "a": [1, 2]}) == codec.digest({"a": [1, 2], "b": 1})
    assert codec.digest({"a": 1}) != codec.digest({"a": 2})


def test_task_seed_is_sha256_of_run_seed_and_key():
    # int(sha256(b"0:step-0").hexdigest()[:8], 16), computed once by hand
    assert task_seed(0, "step-0") == 127023870
    assert task_seed(7, "iter-0003/generate") == 2495486363
    assert task_seed(1, "step-0") != task_seed(0, "step-0")


def test_run_id_and_cache_key_shapes():
    rid = new_run_id("grpo")
    name, day, clock, tail = rid.split("-")
    assert (name, len(day), len(clock), len(tail)) == ("grpo", 8, 6, 4)
    assert cache_key("f", 1, "c", "i") == cache_key("f", 1, "c", "i")
    assert cache_key("f", 2, "c", "i") != cache_key("f", 1, "c", "i")
