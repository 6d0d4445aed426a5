"""How long a lost worker node stays alive in Ray's eyes (issue 26 §4): a simulated
2-node cluster (tasks/simulate/cluster.py), its worker node's raylet and processes
SIGKILLed as bench/chaos_inject.py loses a node, timed until `ray.nodes()` marks it dead;
a fresh node then joins in its place, and the next loss waits out Ray's first-probe delay.
Once with alignflow's settings (tasks/simulate/node_health.py), once with Ray's defaults.

    .venv/bin/python bench/node_loss.py [--repeats 5] [--settings alignflow,ray-defaults]

Prints one JSON line per setting (each in a process of its own: a process keeps the token
auth of the first simulated cluster it joined) and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from alignflow.tasks.simulate import node_health  # noqa: E402
from alignflow.tasks.simulate.cluster import SimulatedCluster  # noqa: E402

SETTINGS = {"alignflow": node_health.ENV, "ray-defaults": node_health.RAY_DEFAULTS}
FIRST_PROBE_S = 5.0 + 1.0  # Ray's health_check_initial_delay_ms (unchanged), and a margin
POLL_S = 0.05


def _alive(node_id: str) -> bool:
    import ray

    return any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes())


def lose_one(sim: SimulatedCluster) -> float:
    """Seconds from the SIGKILL of the worker node to Ray calling it dead; a fresh node
    joins in its place (ready for the next loss)."""
    cluster = sim._ray
    (worker,) = cluster.worker_nodes
    node_id = worker.node_id
    start = time.monotonic()
    cluster.remove_node(worker, allow_graceful=False)
    while _alive(node_id):
        if time.monotonic() - start > 120:
            raise TimeoutError(f"node {node_id} still alive 120 s after its loss")
        time.sleep(POLL_S)
    took = time.monotonic() - start
    cluster.add_node(**sim._node_args(1))
    cluster.wait_for_nodes(timeout=120)
    return took


def measure(name: str, repeats: int) -> dict:
    """One simulated 2×1 cluster with the named settings; `repeats` losses."""
    env = SETTINGS[name]
    with SimulatedCluster(2, 1, health=env) as sim:
        sim.connect()
        import ray

        seen = ray._private.state.state.get_system_config()
        times = []
        for _ in range(repeats):
            time.sleep(FIRST_PROBE_S)
            times.append(round(lose_one(sim), 2))
    return {"settings": name, "values": node_health.system_config(env),
            "head_has": {k: seen.get(k) for k in node_health.system_config(env)},
            "bound_s": node_health.detection_bound_s(env), "detect_s": times,
            "median_s": statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--settings", default="alignflow,ray-defaults")
    parser.add_argument("--one", choices=sorted(SETTINGS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.one:
        print(json.dumps(measure(args.one, args.repeats)), flush=True)
        return
    medians = {}
    for name in args.settings.split(","):
        out = subprocess.run([sys.executable, __file__, "--one", name, "--repeats",
                              str(args.repeats)], check=True, capture_output=True, text=True)
        line = out.stdout.strip().splitlines()[-1]
        print(line, flush=True)
        medians[name] = json.loads(line)["median_s"]
    if {"alignflow", "ray-defaults"} <= medians.keys():
        ratio = medians["ray-defaults"] / medians["alignflow"]
        print(f"median detection: Ray's defaults {medians['ray-defaults']:.2f} s, "
              f"alignflow's {medians['alignflow']:.2f} s: {ratio:.1f}x faster")


if __name__ == "__main__":
    main()
