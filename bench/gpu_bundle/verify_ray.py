"""Does the slimmed Ray still start? Checked on this machine's Python with its own wheel.

The bundle's Ray is a cp312 build and this machine runs another Python, so the same pruning
(`pins.SLIM["ray"]`: folders dropped, ELF files stripped, RECORD rewritten) is applied to
Ray's wheel for this interpreter, unpacked into a folder, and a fresh Python with only that
folder in front of its path starts a local Ray: GCS, raylet, a task, an actor, and an actor
in a placement group. The child also checks it imported the pruned copy (`ray.data` gone).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.gpu_bundle import fetch, pins, slim

SCRIPT = textwrap.dedent("""
    import importlib.util, json, os, sys, time
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    root = sys.argv[1]
    assert ray.__file__.startswith(root), f"imported {ray.__file__}, not the pruned copy"
    assert importlib.util.find_spec("ray.data") is None, "ray.data is still there"
    t0 = time.time()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             _temp_dir=sys.argv[2])

    @ray.remote
    def square(x):
        return x * x

    @ray.remote
    class Counter:
        def __init__(self):
            self.n = 0
        def add(self, k):
            self.n += k
            return self.n

    assert ray.get(square.remote(7)) == 49
    counter = Counter.remote()
    assert ray.get([counter.add.remote(1), counter.add.remote(2)])[-1] == 3
    pg = placement_group([{"CPU": 1}], strategy="PACK")
    ray.get(pg.ready(), timeout=120)
    placed = Counter.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg)).remote()
    assert ray.get(placed.add.remote(5)) == 5
    print(json.dumps({"ray": ray.__version__, "seconds": round(time.time() - t0, 1)}))
    ray.shutdown()
""")


def _python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def verify(cache: Path, work: Path | None = None, log=print) -> dict:
    """Prunes this Python's Ray wheel as the bundle's and starts it; returns its figures."""
    python = _python_tag()
    ray_pin = pins.PINS["ray"].version
    folder = cache / f"cp{python.replace('.', '')}"
    wheel = fetch.download_wheels([("ray", ray_pin)], folder, python=python)["ray"]
    with tempfile.TemporaryDirectory(prefix="gb-ray-", dir=work) as tmp:
        root = slim.unpack(wheel, Path(tmp) / "site")
        dropped = slim.prune(root, pins.SLIM["ray"].drop)
        stripped = slim.strip_elf(root)
        slim.rewrite_record(root)
        log(f"pruned Ray {ray_pin} for Python {python}: {dropped:,} bytes dropped, "
            f"{stripped:,} stripped; starting it")
        env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HOME": tmp,
               "RAY_USAGE_STATS_ENABLED": "0"}
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(root), f"{tmp}/r"],
                              cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-4:])
        raise RuntimeError(f"the pruned Ray did not start (exit {done.returncode}): {tail}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {**figures, "python": python, "dropped_bytes": dropped, "stripped_bytes": stripped}
