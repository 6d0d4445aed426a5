"""Runs started before the "one house" refactor resume after it.

`tests/fixtures/legacy_store` was written by the code before the move (module paths such as
`alignflow.flows.rl_config:RLConfig`, `alignflow.tasks.rl.records:StepOutput`, the loops'
`train.*` keys), with each run's driver gone after a few tasks. Resuming must replay those
tasks (their records decode) and finish the run with the current code.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from alignflow.flows.control import api
from alignflow.flows.journal import runs

pytestmark = pytest.mark.slow
LEGACY = Path(__file__).parent.parent / "fixtures" / "legacy_store"


@pytest.fixture
def legacy_store(tmp_path, tiny_model_dir) -> str:
    shutil.copytree(LEGACY, tmp_path / "store")
    return str(tmp_path / "store")


@pytest.mark.parametrize("run_id,replayed", [
    ("legacy-grpo", ["prompts", "iter-0000/generate", "iter-0000/score", "iter-0000/reference"]),
    ("legacy-dpo", ["prepare", "plan", "reference"]),
    ("legacy-idpo", ["prompts", "round-0000/generate", "round-0000/score", "round-0000/pairs"]),
])
def test_pre_refactor_run_resumes(legacy_store, run_id, replayed):
    store = api.open_store(legacy_store)
    before = runs.read_manifests(store, run_id)
    assert sorted(before) == sorted(replayed)
    # written before run records were signed: the user's own store says so (README, Security)
    api.resume(run_id, store=store, executor="inline", trust_store=True)
    assert api.get_status(run_id, store=store) == "SUCCESSFUL"
    after = runs.read_manifests(store, run_id)
    for key in replayed:  # replayed, not re-run
        assert after[key]["seq"] == before[key]["seq"]
    assert "export" in after
