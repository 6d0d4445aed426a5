"""`status` hashes built-in flows' tasks from source text: the same hashes the imported
tasks carry, and no heavy import on the way."""

import subprocess
import sys

import pytest

from alignflow.flows import registry
from alignflow.flows.engine import Task
from alignflow.flows.journal.static_hashes import flow_task_hashes
from alignflow.flows.loader import load_flow

MODULES = sorted({target.partition(":")[0] for target, _ in registry.BUILTIN.values()})


def _tasks_in(module) -> dict[str, str]:
    return {v.name: v.code_hash for v in vars(module).values() if isinstance(v, Task)}


def _live_tasks(module_name: str) -> dict[str, str]:
    """Task name -> code hash of the tasks the flow module holds or its steps modules do."""
    module = sys.modules[module_name]
    out = _tasks_in(module)
    for value in vars(module).values():
        owner = getattr(value, "__module__", None)
        if isinstance(owner, str) and owner.startswith("alignflow.flows."):
            out |= _tasks_in(sys.modules[owner])
    return out


@pytest.mark.parametrize("module_name", MODULES)
def test_static_hashes_equal_the_imported_tasks(module_name):
    for name, ref in registry.BUILTIN.items():
        if ref[0].startswith(module_name + ":"):
            load_flow(name)
    live = _live_tasks(module_name)
    static = flow_task_hashes(module_name)
    assert live, module_name
    assert {k: static.get(k) for k in live} == live


def test_a_changed_function_changes_its_hash(tmp_path, monkeypatch):
    from alignflow.flows.journal import static_hashes

    before = flow_task_hashes("alignflow.flows.rl.grpo")
    real = static_hashes.module_file

    def edited(name):
        path = real(name)
        if name != "alignflow.tasks.rl.reference":
            return path
        copy = tmp_path / "reference.py"
        copy.write_text(path.read_text().replace('"""log π_ref', '"""(edited) log π_ref'))
        return copy
    monkeypatch.setattr(static_hashes, "module_file", edited)
    after = flow_task_hashes("alignflow.flows.rl.grpo")
    assert after["reference"] != before["reference"]
    assert {k: v for k, v in after.items() if k != "reference"} == \
        {k: v for k, v in before.items() if k != "reference"}


def test_status_code_hashes_import_no_flow_and_no_torch():
    code = ("import sys; from alignflow.flows.cli.views import _current_code; "
            "h = _current_code({'flow_ref': 'grpo', 'run_id': 'r'}); assert h, h; "
            "bad = [m for m in ('torch', 'transformers', 'ray', 'alignflow.flows.rl.grpo') "
            "if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
