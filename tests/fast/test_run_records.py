"""One run.json holding a value no driver writes takes no command down (issue 40 §7): `ls`,
`tick` and `resume --all` name the file and key in one line, mark that run UNREADABLE and
serve the others; `status` of that run is one line naming the file and key."""

from __future__ import annotations

import json

import pytest

from alignflow.cli import main
from alignflow.flows.control import api
from alignflow.flows.journal import runs

pytestmark = pytest.mark.timeout(120)

TIMES = [1e308, -1e308, -1.0, float("nan"), float("inf"), float("-inf"), 10**400, 2**63,
         "1e308", "2024-01-01", True, [], {}]
TEXTS = [1e308, float("nan"), True, 7, [], {"a": 1}]
BAD = {
    "created": TIMES, "ended": TIMES, "wake_at": TIMES, "resumed": TIMES,
    "active": [-5.0, float("nan"), "x", 10**400],
    "status": ["BOGUS", "", None, 1e308, True, [], {"s": "RUNNING"}, "sleeping"],
    "run_id": ["b", "", "../a"],
    "flow": TEXTS, "flow_ref": TEXTS, "error": TEXTS, "error_task": TEXTS,
    "waiting_for": TEXTS, "code_changed": ["step-0", 3, {"k": 1}, [1, 2], True],
    "seed": [1.5, "0", 10**400, 2**63, True, float("nan")],
    "drivers": [-1, 1.5, "2", True], "recoveries": [[], "x", 3],
}
CASES = [(field, value) for field, values in BAD.items() for value in values]


@pytest.fixture
def store(two_finished_runs):
    """Finished runs `a` and `b` of `steps`; `a` sleeps, so `ls` shows its wake time."""
    return two_finished_runs


def _write(store, field, value) -> None:
    meta = store.read_json(runs.run_json("a")) | {"status": runs.SLEEPING, "wake_at": 1e9}
    meta[field] = value
    store.write_bytes(runs.run_json("a"), json.dumps(meta, allow_nan=True).encode())


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("field", "value"), CASES, ids=[f"{f}={v!r:.20}" for f, v in CASES])
def test_a_bad_value_marks_its_run_and_the_rest_is_listed(store, capsys, field, value):
    _write(store, field, value)
    said = f"runs/a/run.json: key '{field}' is "
    for argv in (["ls"], ["tick"], ["resume", "--all"]):
        code, out, err = _cli(capsys, *argv, "--store", store.url)
        assert code == 0 and "Traceback" not in err, err
        warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
        assert len(warnings) == 1 and said in warnings[0], err
        assert warnings[0].endswith("(run a is marked)")
    code, out, _ = _cli(capsys, "ls", "--store", store.url)
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "UNREADABLE" in rows["a"] and "SUCCESSFUL" in rows["b"]
    code, out, err = _cli(capsys, "status", "a", "--store", store.url)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: {store.url}/{said}") and "expected" in err
    assert _cli(capsys, "status", "b", "--store", store.url)[0] == 0


def test_every_field_a_driver_writes_passes(store):
    """The checks accept what the engine itself writes: every run of the fixture reads."""
    assert {m["run_id"]: m["status"] for m in api.list_runs(store)} == {
        "a": "SUCCESSFUL", "b": "SUCCESSFUL"}
    _write(store, "wake_at", 253402300799)  # the last second of year 9999 still shows
    assert api.list_runs(store)[0]["status"] == runs.SLEEPING


def test_status_without_a_run_id_shows_the_newest_readable_one(store, capsys):
    _write(store, "created", float("inf"))
    code, out, err = _cli(capsys, "status", "--store", store.url)
    assert code == 0 and out.startswith("b  flow=")  # the readable one
