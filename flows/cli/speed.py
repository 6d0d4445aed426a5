"""This machine's speed for `--dry-run`'s rough time: dense float32 matrix products per
second (the bulk of a transformer's forward and backward), measured for about a second with
torch on the device a run here would use, and kept per machine so the next dry run reads it
instead of measuring again (`$ALIGNFLOW_SPEED_FILE`, default `~/.cache/alignflow/speed.json`).

A figure, not a promise: generation decodes a token at a time and runs below a matrix
product's rate, so the time it gives is a rough lower bound of the compute alone.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MEASURE_S = 1.0  # how long the calibration runs
SIZE = 512  # rows and columns of the multiplied matrices


@dataclass(frozen=True)
class Speed:
    """FLOP/s of this machine's `device`, and how the figure was found (said in the line)."""

    flops: float
    device: str
    how: str


def speed_file() -> Path:
    if os.environ.get("ALIGNFLOW_SPEED_FILE"):
        return Path(os.environ["ALIGNFLOW_SPEED_FILE"])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("alignflow")) / "speed.json"


def machine_key() -> str:
    """One machine: the host name and the CPU count (the device is stored with the figure)."""
    return f"{platform.node()}/{os.cpu_count()}cpu"


def machine_speed() -> Speed | None:
    """The stored figure of this machine, else one measured now (and stored); None when it
    cannot be measured. The measurement runs in a child process: a dry run's driver
    imports no torch (`tests/fast/test_light_driver.py`)."""
    key, path = machine_key(), speed_file()
    stored = _read(path).get(key)
    if isinstance(stored, dict) and isinstance(stored.get("flops"), int | float):
        return Speed(float(stored["flops"]), str(stored.get("device", "cpu")),
                     f"stored from a calibration on {stored.get('date', '?')}, {path}")
    found = _measure_in_child()
    if found is None:
        return None
    flops, took, device = found
    _store(path, key, flops, device)
    return Speed(flops, device, f"measured for {took:.1f} s just now, kept in {path}")


def _measure_in_child() -> tuple[float, float, str] | None:
    code = ("import json, torch; from alignflow.flows.cli.speed import measure; "
            "d = 'cuda' if torch.cuda.is_available() else 'cpu'; "
            "print(json.dumps([*measure(d), d]))")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=True)
        flops, took, device = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None
    return float(flops), float(took), str(device)


def measure(device: str = "cpu", seconds: float = MEASURE_S) -> tuple[float, float]:
    """(FLOP/s, seconds spent): SIZE×SIZE float32 products on `device` for `seconds`."""
    import torch

    a = torch.randn(SIZE, SIZE, device=device)
    b = torch.randn(SIZE, SIZE, device=device)
    torch.mm(a, b)  # warm-up: thread pool, kernels
    count, start = 0, time.perf_counter()
    while (took := time.perf_counter() - start) < seconds:
        torch.mm(a, b)
        count += 1
        if device == "cuda":
            torch.cuda.synchronize()
    return 2.0 * SIZE ** 3 * count / max(took, 1e-9), took


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _store(path: Path, key: str, flops: float, device: str) -> None:
    """Best effort: a read-only home only means measuring again next time."""
    data = _read(path)
    data[key] = {"flops": flops, "device": device, "date": time.strftime("%Y-%m-%d")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)
    except OSError:
        pass
