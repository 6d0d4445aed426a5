"""A lost worker node of a simulated 2-node cluster is declared dead by Ray within the
bound alignflow's health-check settings give (tasks/simulate/node_health.py), not the
12-15 s of Ray's defaults, and the head holds those settings. Measured by
bench/node_loss.py in a process of its own (a fresh process for a fresh cluster's token)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from alignflow.tasks.simulate import node_health

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench/node_loss.py"
MARGIN_S = 2.0  # the kill itself, `ray.nodes()` polled every 50 ms, 2 busy cores


def test_a_lost_worker_node_is_declared_dead_within_the_bound():
    out = subprocess.run([sys.executable, str(BENCH), "--one", "alignflow", "--repeats", "1"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["head_has"] == node_health.system_config()  # the GCS got them
    bound = node_health.detection_bound_s()
    (took,) = result["detect_s"]
    assert took <= bound + MARGIN_S < node_health.detection_bound_s(node_health.RAY_DEFAULTS)
