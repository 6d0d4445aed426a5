"""The folder → package mapping in pyproject.toml covers every package folder."""

from __future__ import annotations

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
