"""The GPU image's build context is the repository without virtual environments, stores,
caches, .git, build outputs and benchmark results (infra/docker/gpu.Dockerfile.dockerignore),
computed as Docker computes it (tests/infra/dockerignore.py; no daemon or registry needed)."""

from __future__ import annotations

import pytest

from tests.infra.dockerignore import context_files, excluded, rules
from tests.infra.manifests import ROOT

IGNORE = ROOT / "infra/docker/gpu.Dockerfile.dockerignore"
BUDGET = 16 * 2**20  # the sources are ~4 MiB; a venv or a store would be hundreds


@pytest.mark.parametrize(("pattern", "path", "out"), [
    ("*/temp*", "somedir/temporary.txt", True), ("*/temp*", "temp", False),
    ("*/*/temp*", "somedir/subdir/temporary.txt", True), ("temp?", "tempa", True),
    ("temp?", "temp/x", False), ("**/*.go", "a/b/c.go", True), ("**/*.go", "c.go", True),
    ("build", "build/lib/x.py", True), ("/build", "src/build", False),
])
def test_the_matcher_reads_patterns_as_docker_does(pattern, path, out):
    assert excluded(path, rules(pattern)) is out


def test_a_later_exception_brings_a_file_back():
    found = rules("*.md\n!README*.md\nREADME-secret.md")
    assert not excluded("README.md", found) and excluded("notes.md", found)
    assert excluded("README-secret.md", found)


@pytest.mark.parametrize("path", [
    ".venv/lib/python3.11/site-packages/torch/lib/libtorch.so", ".venv-vllm/bin/python",
    ".git/objects/pack/p.pack", "alignflow-store/runs/r/run.json", "dist/gpu-bundle/ray.whl",
    "build/lib/alignflow/cli.py", "bench/out/rl.json", "tasks/__pycache__/x.cpython-311.pyc",
    "alignflow.egg-info/PKG-INFO", ".pytest_cache/v/cache", "report-r.html",
    "tb/r/events.out.tfevents.1.host", "examples/alignflow-store/runs/r/run.json",
])
def test_venvs_stores_caches_git_and_outputs_stay_out(path):
    assert excluded(path, rules(IGNORE.read_text()))


def test_the_context_holds_the_sources_and_fits_the_budget():
    found = dict(context_files(ROOT, rules(IGNORE.read_text())))
    for needed in ("pyproject.toml", "README.md", "alignflow/cli.py", "flows/control/api.py",
                   "tasks/zoo/registry.py", "artifacts/store.py", "catalog/catalog.py",
                   "infra/docker/gpu.Dockerfile"):
        assert needed in found, needed
    total = sum(found.values())
    biggest = sorted(found.items(), key=lambda kv: -kv[1])[:5]
    assert total < BUDGET, f"context {total / 2**20:.1f} MiB; biggest files: {biggest}"
