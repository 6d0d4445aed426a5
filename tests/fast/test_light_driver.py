"""The driver of a Ray run only orchestrates, so it imports no torch, transformers or
datasets (issue 25; nor pandas, which datasets brought): not by loading any built-in flow
or its config class, nor by checking and planning a run (`run --dry-run --executor ray`).
The task bodies and hosts it names (`flows/lazyref.py`) keep the names and code hashes of
the imported functions, so journals written before still resume."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

from alignflow.flows.engine import Task
from alignflow.flows.journal.identity import source_hash
from alignflow.flows.lazyref import LazyRef

HEAVY = ("torch", "transformers", "datasets", "peft", "pandas")

IMPORT_FLOWS = """
import importlib, json, sys
from alignflow.flows.registry import BUILTIN
for target, config in BUILTIN.values():
    for ref in (target, config):
        if ref:
            module, _, name = ref.partition(":")
            getattr(importlib.import_module(module), name)
import alignflow.flows.cli.run_config, alignflow.flows.ray.executors
print(json.dumps(sorted(set(sys.argv[1:]) & set(sys.modules))))
"""

DRY_RUNS = """
import json, sys
from alignflow.cli import main
store = sys.argv[1]
for flow in ("grpo", "dpo", "sft"):
    code = main(["run", flow, "--dry-run", "--executor", "ray", "--store", store])
    assert code == 0, (flow, code)
print(json.dumps(sorted(set(sys.argv[2:]) & set(sys.modules))))
"""


def _heavy_after(code: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *args, *HEAVY], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_builtin_flows_and_configs_import_no_torch() -> None:
    assert _heavy_after(IMPORT_FLOWS) == []


def test_a_ray_dry_run_imports_no_torch(tmp_path) -> None:
    assert _heavy_after(DRY_RUNS, str(tmp_path / "store")) == []


def _lazy_tasks() -> list[Task]:
    """Every task the built-in flows declare by name (their modules and step modules)."""
    import importlib

    from alignflow.flows.registry import BUILTIN

    for target, _ in BUILTIN.values():
        importlib.import_module(target.partition(":")[0])
    flows = [m for name, m in list(sys.modules.items()) if name.startswith("alignflow.flows.")]
    found = {id(v): v for m in flows for v in vars(m).values() if isinstance(v, Task)}
    return [t for t in found.values() if isinstance(t.fn, LazyRef)]


def test_lazy_tasks_keep_the_names_and_hashes_of_their_functions() -> None:
    tasks = _lazy_tasks()
    assert len({t.name for t in tasks}) >= 24
    for t in tasks:
        fn = t.fn.resolve()
        assert t.name == fn.__name__
        assert t.code_hash == source_hash(fn), t.fn.target


def test_a_lazy_ref_pickles_by_name_and_resolves_where_called() -> None:
    ref = LazyRef("alignflow.tasks.rewards.answers:check_rule")
    back = pickle.loads(pickle.dumps(ref))
    assert back.target == ref.target and back._obj is None
    assert back("rule:gsm8k") == ("gsm8k", None)
    with pytest.raises(Exception, match="module:name"):
        LazyRef("no-colon")


def test_a_warm_worker_knows_the_modules_the_driver_left_unimported() -> None:
    import importlib

    from alignflow.flows.lazyref import MODULES

    importlib.import_module("alignflow.flows.rl.grpo")
    assert {"alignflow.tasks.rl.learn", "alignflow.tasks.steps.host",
            "alignflow.tasks.steps.generate"} <= MODULES
