"""Getting the bundle's files from the package index: node wheels, DeepSpeed, the project.

Wheels are fetched for the node, not for this machine (`--python-version 3.12 --platform
manylinux... --only-binary=:all: --no-deps`): the plan already knows every distribution, so
pip resolves nothing. DeepSpeed is built here from its pinned source release with its ops
left to JIT on the node (`DS_BUILD_OPS=0`) and its accelerator set to cuda (as a build on
the node would record it, with its nvidia-ml-py requirement); its wheel is pure Python. The project's wheel
is needed because its package-dir mapping (alignflow.tasks = tasks/, ...) exists only in an
installed copy, not in a checkout on PYTHONPATH. A cache folder keeps what was fetched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

from bench.gpu_bundle import pins

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {tail}")


def node_wheel_args(python: str = pins.PYTHON) -> list[str]:
    """pip options that select wheels for the node's interpreter and platform."""
    abi = "cp" + python.replace(".", "")
    args = ["--only-binary=:all:", "--no-deps", "--python-version", python,
            "--implementation", "cp", "--abi", abi]
    for platform in pins.PLATFORMS:
        args += ["--platform", platform]
    return args


def find_wheel(folder: Path, name: str, version: str) -> Path | None:
    """The wheel of `name==version` in `folder`, if fetched."""
    for path in sorted(folder.glob("*.whl")):
        wname, wversion, _, _ = parse_wheel_filename(path.name)
        if wname == canonicalize_name(name) and str(wversion) == version:
            return path
    return None


def download_wheels(specs: list[tuple[str, str]], folder: Path,
                    python: str = pins.PYTHON) -> dict[str, Path]:
    """`name -> wheel` for every (name, version), fetching what the cache lacks."""
    folder.mkdir(parents=True, exist_ok=True)
    missing = [f"{n}=={v}" for n, v in specs if find_wheel(folder, n, v) is None]
    if missing:
        _run([*PIP, "download", *node_wheel_args(python), "-d", str(folder), *missing],
             f"pip download of {len(missing)} wheels for Python {python}")
    found = {n: find_wheel(folder, n, v) for n, v in specs}
    lost = [n for n, p in found.items() if p is None]
    if lost:
        raise RuntimeError(f"pip download gave no wheel for {lost} in {folder}")
    return {n: p for n, p in found.items() if p is not None}


def build_from_sdist(name: str, version: str, cache: Path) -> Path:
    """A wheel of `name==version` built here from its source release (DeepSpeed: no ops)."""
    built = cache / "built"
    if (wheel := find_wheel(built, name, version)) is not None:
        return wheel
    sdists = cache / "sdist"
    sdists.mkdir(parents=True, exist_ok=True)
    if not _find_sdist(sdists, name, version):
        _run([*PIP, "download", "--no-deps", "--no-binary=:all:", "-d", str(sdists),
              f"{name}=={version}"], f"pip download of the {name} {version} source release")
    env = {**os.environ, **pins.SDIST_BUILD_ENV}
    _run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", str(built),
          str(_find_sdist(sdists, name, version))], f"building the {name} wheel", env)
    wheel = find_wheel(built, name, version)
    if wheel is None:
        raise RuntimeError(f"pip wheel left no {name} {version} wheel in {built}")
    return wheel


def _find_sdist(folder: Path, name: str, version: str) -> Path | None:
    for path in sorted(folder.glob("*.tar.gz")):
        sname, sversion = parse_sdist_filename(path.name)
        if sname == canonicalize_name(name) and str(sversion) == version:
            return path
    return None


def build_project(repo: Path, out: Path) -> Path:
    """The project's wheel from the working tree (rebuilt every time: the code moves)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("alignflow-*.whl"):
        old.unlink()
    _run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(repo)],
         "building the alignflow wheel")
    return next(out.glob("alignflow-*.whl"))


def wheel_requires(wheel: Path) -> list[str]:
    """Requires-Dist lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
