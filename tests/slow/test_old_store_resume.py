"""A store written before records had registered names (issue 45) still resumes bitwise.

The old store is made by the real driver with the old naming put back (every record named
`module:QualName`, as the code before wrote and read them): GRPO on the tiny model,
SIGKILLed once iteration 2's learn step has started. (Paths of modules that moved since are
read through the same table: tests/fast/test_journal_names.py, test_legacy_resume.py.)
The current code resumes it and must end on the very weights of a run never interrupted;
what it commits after the resume carries registered names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests.rl.test_rl_resume import _driver, _kill_during_learn

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# `alignflow.cli` with the naming of the code before issue 45: records written and read
# by module path
OLD_NAMES = """
import sys
from alignflow.flows.journal import legacy_names, names
names.name_of = lambda cls: f"{names.module_of(cls)}:{cls.__qualname__}"
legacy_names.registered_name = lambda name: name
from alignflow.cli import main
sys.exit(main())
"""


def _sets(tiny_model_dir: Path) -> list[str]:
    """tests/rl's small GRPO run (rl_sets), three iterations."""
    return [f"actor.model_name_or_path={tiny_model_dir}", "data.max_samples=64",
            "rollout.batch_size=8", "rollout.n_samples_per_prompt=4",
            "rollout.max_new_tokens=8", "rollout.micro_batch_size=16",
            "data.apply_chat_template=true", "algo.kl.init_coef=0",
            "reward.sources=rule:target:e", "train.batch_size=16", "train.micro_batch_size=8",
            "actor.adam.lr=1e-2", "critic.adam.lr=1e-2", "actor.lr_warmup_ratio=0",
            "critic.lr_warmup_ratio=0", "num_threads=1", "train.max_iterations=3"]


def _old_driver(store: Path, run_id: str, sets: list[str]) -> subprocess.Popen:
    args = [sys.executable, "-c", OLD_NAMES, "run", "grpo", "--run-id", run_id, "--seed", "3",
            "--executor", "inline", "--store", str(store)]
    for s in sets:
        args += ["--set", s]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=dict(os.environ, ALIGNFLOW_LEASE_TTL="2"))


def _tags(store: Path, run_id: str, files: list[str] | None = None) -> set[str]:
    found: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("__type__"), str):
                found.add(value["__type__"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    folder = store / "runs" / run_id
    for path in [folder / f for f in files] if files else folder.rglob("*.json"):
        walk(json.loads(path.read_text()))
    return found


def test_a_store_of_module_paths_resumes_bitwise(tiny_model_dir, tmp_path):
    store, sets = tmp_path / "store", _sets(tiny_model_dir)
    old = _old_driver(store, "old", sets)
    _kill_during_learn(old, store, "old")
    before = runs.read_manifests(api.open_store(str(store)), "old")
    assert "iter-0002/score" in before and "iter-0002/learn" not in before
    written = _tags(store, "old")
    assert "alignflow.tasks.steps.records:StepOutput" in written
    assert all(":" in t for t in written), sorted(written)  # nothing has a registered name yet
    time.sleep(2.5)  # the dead driver's lease expires (ALIGNFLOW_LEASE_TTL=2)
    api.resume("old", store=str(store), executor="inline", force=True)

    straight = _driver(store, "straight", sets)
    assert straight.wait(timeout=600) == 0, straight.stderr.read().decode()[-2000:]
    after = runs.read_manifests(api.open_store(str(store)), "old")
    for key, manifest in before.items():  # replayed, not re-run
        assert after[key]["seq"] == manifest["seq"], key
    new = _tags(store, "old", ["tasks/iter-0002/learn.json"])
    assert new and not [t for t in new if ":" in t], sorted(new)
    resumed = load_file(store / "runs" / "old" / "final" / "actor" / "model.safetensors")
    reference = load_file(store / "runs" / "straight" / "final" / "actor" / "model.safetensors")
    assert reference.keys() == resumed.keys()
    for name, tensor in reference.items():
        assert tensor.dtype == resumed[name].dtype
        assert bool((tensor == resumed[name]).all()), name
