"""The folder → package mapping in pyproject.toml covers every package folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = {"alignflow": "alignflow", "flows": "alignflow.flows", "tasks": "alignflow.tasks",
       "artifacts": "alignflow.artifacts", "catalog": "alignflow.catalog"}


def _declared() -> tuple[set[str], dict[str, str]]:
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(tool["packages"]), tool["package-dir"]


def test_every_package_folder_is_listed():
    packages, _ = _declared()
    found = set()
    for folder, package in TOP.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([package, *rel]))
    assert found - packages == set(), "add these to [tool.setuptools] packages"
    assert packages - found == set(), "listed packages without a folder"


def test_top_folders_map_onto_subpackages():
    _, package_dir = _declared()
    assert package_dir == {package: folder for folder, package in TOP.items()}


def test_a_checkout_on_the_path_is_the_whole_package(tmp_path):
    """Ray puts the driver's working directory first on each worker's path: a command run
    from a clone with a non-editable install (the GPU bundle's wheel) imported the checkout's
    `alignflow/` without its subpackages. Without site-packages (no editable finder), the
    subpackages must resolve from the checkout alone."""
    code = ("import alignflow.flows.lazyref as f, alignflow.catalog as c, alignflow; "
            "print(f.__file__); print(c.__file__)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(ROOT / "flows" / "lazyref.py"),
                                   str(ROOT / "catalog" / "__init__.py")]
