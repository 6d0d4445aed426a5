"""The offline GPU bundle and the one-GPU node check, on CPU: the builder's plan (no
downloads), slimming and the offline installer on small fakes, and bench/gpu_check.sh in its
CPU mode (every GPU check `needs-cuda`, the results file and the summary) and its deadline."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bench.gpu_bundle import build, manifest, pins, slim
from bench.gpu_bundle import install as installer
from bench.gpu_bundle.plan import PlanError, installed_requires, resolve
from bench.gpu_check import runner
from bench.gpu_check.checks import CHECKS, Check

ROOT = Path(__file__).resolve().parents[2]
GPU_CHECKS = [c.name for c in CHECKS if c.needs_cuda]


def test_plan_places_every_declared_dependency_and_pins_the_special_parts(tmp_path):
    plan = build.offline_plan(ROOT)
    doc = manifest.document(plan)
    core = {f["name"]: f for f in doc["files"] if f["group"] == "core"}
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    node = set(pins.NODE_HAS) | set(pins.NODE_IMPLIED)
    for line in declared:
        name = canonicalize_name(Requirement(line).name)
        assert name in node or name in core or name in doc["excluded"], name
    assert {n: core[n]["version"] for n in ("deepspeed", "ray", "duckdb", "pandas")} == {
        "deepspeed": "0.19.8", "ray": "2.60.0", "duckdb": "2.0.1", "pandas": "3.1.1"}
    assert core["deepspeed"]["kind"] == "sdist" and core["alignflow"]["kind"] == "project"
    assert {core[n]["install"] for n in ("ray", "duckdb", "pandas")} == {"untar"}
    assert not node & set(core)  # nothing the node has is shadowed
    fallback = {f["name"]: f["version"] for f in doc["files"] if f["group"] != "core"}
    assert fallback == {"datasets": "4.0.0", "dill": "0.3.8", "multiprocess": "0.70.16"}
    assert doc["planned_only"] and doc["total_bytes"] is None
    assert all(f["bytes"] is None and f["sha256"] is None for f in doc["files"])
    assert {"torch", "transformers", "pyarrow"} <= set(doc["node"])


def test_plan_cli_writes_the_manifest_skeleton(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench.gpu_bundle", "plan", str(tmp_path),
                           "--cache", str(tmp_path / "no-cache")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "manifest.json").read_text())
    assert doc["python"] == "3.12" and doc["limit_bytes"] == 60_000_000
    assert "slim/ray-2.60.0.tar.xz" in {f["path"] for f in doc["files"]}
    assert "excluded: matplotlib, s3fs" in done.stdout


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: t.pop("msgpack"), r"ray==2\.60\.0 needs msgpack.*neither pins nor excludes"),
    (lambda t: t.update(dill=pins.Pin("0.4.5")), r"needs dill.*pins dill==0\.4\.5"),
    (lambda t: t.update(toolz=pins.Pin("1.0.0")), r"pins \['toolz'\], which nothing"),
])
def test_plan_refuses_pins_that_drift(change, message):
    table = dict(pins.PINS)
    change(table)
    with pytest.raises(PlanError, match=message):
        resolve(ROOT / "pyproject.toml", installed_requires, table)


def _wheel(folder: Path, name: str, files: dict[str, bytes]) -> Path:
    """A minimal valid wheel of `name` 1.0 holding `files` (pip installs it)."""
    info = f"{name}-1.0.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: "
             "1.0\n".encode(), f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
             b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for rel, data in files.items():
            zf.writestr(rel, data)
        zf.writestr(f"{info}/RECORD", "".join(f"{r},,\n" for r in [*files, f"{info}/RECORD"]))
    return path


def test_slim_drops_strips_rewrites_record_and_refuses_a_moved_folder(tmp_path):
    elf = Path("/bin/true").read_bytes()
    wheel = _wheel(tmp_path, "fat", {"fat/__init__.py": b"X = 1\n", "fat/big/junk.py": b"0" * 5000,
                                     "fat/bin/tool": elf})
    stats = slim.slim_wheel(wheel, pins.Slim(drop=("fat/big",), strip=True), tmp_path / "w",
                            tmp_path / "fat.tar.xz")
    with tarfile.open(tmp_path / "fat.tar.xz") as tar:
        names = sorted(tar.getnames())
        record = tar.extractfile("fat-1.0.dist-info/RECORD").read().decode()
    assert "fat/big/junk.py" not in names and "fat/__init__.py" in names
    assert sorted(line.split(",")[0] for line in record.splitlines()) == names
    assert stats["dropped"] == 5000 and stats["stripped"] >= 0 and stats["xz"] > 0
    with pytest.raises(FileNotFoundError, match="fat/gone is not in the unpacked wheel"):
        slim.slim_wheel(wheel, pins.Slim(drop=("fat/gone",)), tmp_path / "w2", tmp_path / "x")


def _fake_bundle(tmp_path: Path, *, slim_metadata: bool = True) -> Path:
    """A bundle for this Python: one wheel, one slim part, a fallback wheel, a manifest."""
    bundle = tmp_path / "bundle"
    (bundle / "wheels").mkdir(parents=True)
    (bundle / "fallback").mkdir()
    _wheel(bundle / "wheels", "tinypkg", {"tinypkg/__init__.py": b"VALUE = 7\n"})
    _wheel(bundle / "fallback", "datasets", {"datasets/__init__.py": b"OLD = True\n"})
    part = tmp_path / "part"
    (part / "slimpkg").mkdir(parents=True)
    (part / "slimpkg" / "__init__.py").write_text("SLIM = True\n")
    if slim_metadata:
        (part / "slimpkg-1.0.dist-info").mkdir()
        (part / "slimpkg-1.0.dist-info" / "METADATA").write_text("Name: slimpkg\n")
    slim.tar_xz(part, bundle / "slim" / "slimpkg-1.0.tar.xz")
    entries = [("wheels/tinypkg-1.0-py3-none-any.whl", "tinypkg", "core", "pip"),
               ("slim/slimpkg-1.0.tar.xz", "slimpkg", "core", "untar"),
               ("fallback/datasets-1.0-py3-none-any.whl", "datasets", "datasets-fallback", "pip")]
    files = [{"path": p, "name": n, "version": "1.0", "group": g, "install": i,
              "bytes": (bundle / p).stat().st_size, "sha256": manifest.sha256(bundle / p)}
             for p, n, g, i in entries]
    doc = {"python": f"{sys.version_info.major}.{sys.version_info.minor}", "files": files,
           "datasets_needs": {"pyarrow": "999"}, "abi": "", "platforms": []}
    manifest.write(doc, bundle)
    return bundle


@pytest.mark.parametrize("use_pip", [True, False])
def test_installer_puts_wheels_and_slim_parts_in_the_target(tmp_path, use_pip):
    bundle = _fake_bundle(tmp_path)
    record = installer.install(bundle, tmp_path / "site", use_pip=use_pip)
    site = tmp_path / "site"
    assert (site / "tinypkg" / "__init__.py").is_file() and (site / "slimpkg").is_dir()
    assert (site / "datasets" / "__init__.py").read_text() == "OLD = True\n"  # pyarrow < 999
    assert record["datasets_group"] == "datasets-fallback"
    assert record["wheels_by"] == ("pip" if use_pip else "unzip")
    assert json.loads((site / installer.RECORD).read_text())["installed"]["tinypkg"] == "1.0"


def test_installer_refuses_a_damaged_bundle_and_another_python(tmp_path):
    bundle = _fake_bundle(tmp_path)
    with (bundle / "wheels" / "tinypkg-1.0-py3-none-any.whl").open("ab") as f:
        f.write(b"x")
    with pytest.raises(installer.InstallError, match=r"1 bundle file\(s\) damaged: wheels/tiny"):
        installer.install(bundle, tmp_path / "site")
    doc = json.loads((bundle / "manifest.json").read_text())
    manifest.write({**doc, "python": "3.99"}, bundle)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    with pytest.raises(installer.InstallError, match=f"bundle is for Python 3.99, this is {here}"):
        installer.install(bundle, tmp_path / "site")
    bare = _fake_bundle(tmp_path / "bare", slim_metadata=False)
    with pytest.raises(installer.InstallError, match=r"lacks the metadata of \['slimpkg==1.0'\]"):
        installer.install(bare, tmp_path / "bare-site", use_pip=False)


def test_datasets_set_follows_the_node_versions():
    doc = {"datasets_needs": pins.DATASETS_NEEDS, "files": [
        {"name": n, "group": g, "install": "pip"} for n, g in
        [("datasets", "core"), ("dill", "core"), ("ray", "core"), ("datasets", "datasets-fallback")]]}
    assert installer.datasets_group(doc, {"pyarrow": "26.0.1", "huggingface-hub": "1.31.0"}) == "core"
    assert installer.datasets_group(doc, {"pyarrow": "23.0.0", "huggingface-hub": "2.0"}) != "core"
    assert installer.datasets_group(doc, {"pyarrow": "26.0", "huggingface-hub": None}) != "core"
    picked = installer.selected(doc, "datasets-fallback")
    assert [(f["name"], f["group"]) for f in picked] == [("ray", "core"),
                                                          ("datasets", "datasets-fallback")]


def _gpu_check(out: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), *args, "--out",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)


def _results(out: Path) -> dict[str, dict]:
    return {r["name"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def test_versions_without_a_bundle_reports_drift_from_the_pins_and_passes(monkeypatch):
    """A fresh clone's venv holds the newest releases pip found (platformdirs 4.14.9 beside
    the 4.14.8 pin failed `make test`): without a bundle that is drift, not a failure; an
    installed bundle at another version, a missing package or a failed import still fail."""
    from bench.gpu_check.checks import versions

    have = importlib.metadata.version("platformdirs")
    pin = {"platformdirs": "0.0.1", "alignflow-no-such-dist": "1.0"}
    found, problems = versions.package_figures(pin, strict=False)
    assert found["platformdirs"] == {**found["platformdirs"], "found": have,
                                     "drift": "pin 0.0.1"}
    assert problems == ["alignflow-no-such-dist 1.0: not installed"]
    _, strict = versions.package_figures({"platformdirs": "0.0.1"})
    assert strict == [f"platformdirs: expected 0.0.1, found {have}"]
    monkeypatch.delenv("GPU_CHECK_MANIFEST", raising=False)
    monkeypatch.setattr(versions, "bundled", lambda: {"platformdirs": "0.0.1"})
    figures = versions.check([])
    assert f"1 not at the pin: platformdirs {have} (pin 0.0.1)" in figures["summary"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_check_cpu_mode_reports_needs_cuda_for_every_gpu_check(tmp_path):
    done = _gpu_check(tmp_path, "--current-env")
    assert done.returncode == 0, done.stderr[-2000:]
    results = _results(tmp_path)
    assert list(results) == ["install", *(c.name for c in CHECKS)]
    assert results["versions"]["status"] == "pass", results["versions"]["error"]
    assert results["versions"]["figures"]["cuda_available"] is False
    ray = results["versions"]["figures"]["bundled"]["ray"]  # this venv's, whatever pip chose
    assert ray["found"] == importlib.metadata.version("ray") and ray["expected"] == "2.60.0"
    assert results["tiny_model"]["status"] == "pass", results["tiny_model"]["error"]
    assert 0 < results["tiny_model"]["figures"]["params"] < 1_000_000
    assert {results[n]["status"] for n in GPU_CHECKS} == {"needs-cuda"}
    for name in GPU_CHECKS:
        assert any(line.startswith(name) and "needs-cuda" in line
                   for line in done.stdout.splitlines()), name
    assert (tmp_path / "summary.txt").read_text().splitlines()[-1].startswith("totals: ")


def test_gpu_checks_report_needs_cuda_themselves(tmp_path):
    names = ("nccl_stats_allreduce", "sleep_zero3", "sync_staging_7b", "memory_plan")
    done = _gpu_check(tmp_path, "--current-env", "--spawn-all", "--only", ",".join(names))
    assert done.returncode == 0, done.stderr[-2000:]
    results = _results(tmp_path)
    for name in names:
        assert results[name]["status"] == "needs-cuda"
        assert "sees no CUDA device" in results[name]["figures"]["reason"]
        assert (tmp_path / "logs" / f"{name}.log").is_file()


def test_no_check_starts_after_the_deadline(tmp_path):
    done = _gpu_check(tmp_path, "--current-env", "--start-before", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    results = _results(tmp_path)
    checks = [r for n, r in results.items() if n != "install"]
    assert len(checks) == len(CHECKS)
    assert all(r["status"] == "skip" and "deadline" in r["figures"]["reason"] for r in checks)


class _Sleeper(Check):
    @property
    def argv(self) -> list[str]:
        return ["-c", "import time; print('started', flush=True); time.sleep(60)"]


def test_a_check_is_killed_at_the_end_of_the_budget(tmp_path):
    budget = runner.Budget(time.time(), start_before=100, end_by=2)
    check = _Sleeper("sleeper", "none", 300, False, "sleeps")
    assert budget.timeout_for(check) <= 2
    assert runner.Budget(time.time() - 500, end_by=480).timeout_for(check) == 1.0
    ctx = runner.Context(sys.executable, dict(os.environ), ROOT, tmp_path / "logs")
    start = time.perf_counter()
    line = runner.run_one(check, ctx, budget.timeout_for(check))
    assert time.perf_counter() - start < 15
    assert line["status"] == "fail" and line["error"][0].startswith("timed out after")
    assert "started" in line["error"]


def _project_imports(path: Path) -> list[tuple[str, str, int]]:
    """(module, name, line) for each `from <project module> import name`, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
                "alignflow", "bench", "tests"):
            found += [(node.module, alias.name, node.lineno) for alias in node.names]
    return found


def test_every_name_a_gpu_check_imports_exists_on_the_cpu():
    """A check's body runs only under CUDA, so a renamed project name would first fail on the
    rare GPU machine (it did: `LoraSection`); resolve every one here."""
    missing = []
    for path in sorted((ROOT / "bench" / "gpu_check" / "checks").glob("*.py")):
        for module, name, line in _project_imports(path):
            if not hasattr(importlib.import_module(module), name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{path.name}:{line}: {module}.{name}")
    assert not missing, missing
