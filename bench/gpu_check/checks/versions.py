"""Versions: python, torch, CUDA, driver, GPU, nvcc; every bundled package at its version.

Each bundled distribution is looked up (version, and where it was found: the bundle's
folder or the node's site-packages) and its top-level modules imported. Requirements of the
bundled packages that the node does not meet, and node packages a bundled copy shadows,
are listed: they are the assumptions `pins.NODE_HAS` and `NODE_IMPLIED` make about the
node. Runs without CUDA too, and tells the runner whether CUDA is there.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

from bench.gpu_check.checks.common import CheckFailed, run

NODE_PACKAGES = ("torch", "transformers", "peft", "accelerate", "pyarrow", "fsspec",
                 "safetensors", "tensorboard", "numpy", "pyyaml", "protobuf", "psutil", "ninja",
                 "huggingface-hub", "tokenizers", "typing-extensions")


def _command(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[-1].strip() if lines else None


def device_figures() -> dict:
    import torch

    found = {"python": platform.python_version(), "torch": torch.__version__,
             "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
             "devices": torch.cuda.device_count(),
             "driver": _command(["nvidia-smi", "--query-gpu=driver_version",
                                 "--format=csv,noheader"]),
             "nvcc": _command(["nvcc", "--version"])}
    if found["cuda_available"]:
        props = torch.cuda.get_device_properties(0)
        found |= {"gpu": props.name, "capability": f"{props.major}.{props.minor}",
                  "gpu_memory_gib": round(props.total_memory / 2**30, 1),
                  "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                  "bf16": torch.cuda.is_bf16_supported()}
    return found


def bundled() -> dict[str, str]:
    """name -> version the installed bundle promises (its manifest), else the pins (this
    interpreter's own packages, judged as drift; without CUDA torch, less what only CUDA
    builds need)."""
    path = os.environ.get("GPU_CHECK_MANIFEST")
    if path:
        files = json.loads(Path(path).read_text())["files"]
        site = Path(os.environ.get("GPU_CHECK_OUT", ".")) / "site" / ".alignflow-bundle.json"
        if site.is_file():  # the set the installer chose (datasets or its fallback)
            return json.loads(site.read_text())["installed"]
        return {f["name"]: f["version"] for f in files if f["group"] == "core"
                and f["kind"] != "installer"}
    import torch

    from bench.gpu_bundle import pins

    cuda_only = {n for names in pins.CUDA_BUILD_REQUIRES.values() for n in names}
    absent = {n for n in pins.NOT_IN_EVERY_ENV if importlib.util.find_spec(n) is None}
    return {name: pin.version for name, pin in pins.PINS.items()
            if (torch.version.cuda or name not in cuda_only) and name not in absent}


@functools.cache
def _top_levels() -> dict[str, list[str]]:
    """Top-level module -> distributions, read once: each read walks every distribution's
    file list on the path (~1 s per read on a GPU node's site-packages; it was read once per
    bundled package, 42 times, and the check took 48 s)."""
    return md.packages_distributions()


def _modules(name: str) -> list[str]:
    """The modules to import for a distribution: the one named like it (duckdb, not also
    its optional adbc_driver_duckdb), else every public top-level module it installs."""
    tops = _top_levels()
    mine = sorted(m for m, dists in tops.items() if name in {d.lower().replace("_", "-")
                  for d in dists} and m.isidentifier() and not m.startswith("_"))
    same = name.replace("-", "_")
    return [same] if same in mine else mine


def package_figures(expected: dict[str, str], *, strict: bool = True
                    ) -> tuple[dict, list[str]]:
    """Per package: found version, location, import errors; and the problems seen.

    strict=False (no bundle installed: this interpreter's own packages, which pip resolved
    whenever it was set up) records a version other than the pin as `drift` in its row, not
    as a problem: a fresh clone gets the newest releases, and failing on them would test
    the day of the install, not the code."""
    found, problems = {}, []
    for name, version in sorted(expected.items()):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            found[name] = {"expected": version, "found": None}
            problems.append(f"{name} {version}: not installed")
            continue
        row = {"expected": version, "found": dist.version,
               "at": str(Path(str(dist.locate_file(""))).resolve())}
        errors, start = [], time.perf_counter()
        for module in _modules(name):
            try:
                importlib.import_module(module)
            except Exception as exc:  # an import that fails is the finding
                errors.append(f"{module}: {type(exc).__name__}: {exc}".splitlines()[0])
        row["import_s"] = round(time.perf_counter() - start, 2)
        if errors:
            row["import_errors"] = errors
            problems.append(f"{name}: {errors[0]}")
        if dist.version != version and strict:
            problems.append(f"{name}: expected {version}, found {dist.version}")
        elif dist.version != version:
            row["drift"] = f"pin {version}"
        found[name] = row
    return found, problems


def requirement_figures(expected: dict[str, str]) -> dict[str, list[str]]:
    """Requirements of bundled packages not met here, and node copies a bundled one hides."""
    from packaging.requirements import Requirement

    unmet, shadowed = [], []
    for name in sorted(expected):
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                have = md.version(req.name)
            except md.PackageNotFoundError:
                have = None
            if have is None or not req.specifier.contains(have, prereleases=True):
                unmet.append(f"{name} needs {req.name}{req.specifier}, found {have}")
        copies = {str(d.locate_file("")) for d in md.distributions(name=name)}
        if len(copies) > 1:
            shadowed.append(f"{name}: {len(copies)} copies on the path (the first wins)")
    return {"unmet_requirements": unmet, "shadowed": shadowed}


def check(argv: list[str]) -> dict:
    figures = device_figures()
    expected = bundled()
    packages, problems = package_figures(expected, strict=bool(os.environ.get(
        "GPU_CHECK_MANIFEST")))
    nodes = {}
    for name in NODE_PACKAGES:
        try:
            nodes[name] = md.version(name)
        except md.PackageNotFoundError:
            nodes[name] = None
    slowest = sorted(packages.items(), key=lambda kv: -kv[1].get("import_s", 0.0))[:5]
    figures |= {"node_packages": nodes, "bundled": packages, **requirement_figures(expected),
                "slowest_imports_s": {name: row.get("import_s") for name, row in slowest}}
    gpu = figures.get("gpu", "no CUDA device")
    figures["summary"] = (f"py {figures['python']}, torch {figures['torch']} "
                          f"(CUDA {figures['torch_cuda']}), {gpu}, {len(packages)} bundled")
    drift = [f"{n} {r['found']} ({r['drift']})" for n, r in packages.items() if "drift" in r]
    if drift:
        figures["summary"] += f"; {len(drift)} not at the pin: {', '.join(drift)}"
    if problems:
        raise CheckFailed(f"{len(problems)} bundled package problem(s): {problems[0]}",
                          {**figures, "problems": problems})
    return figures


if __name__ == "__main__":
    run(check)
