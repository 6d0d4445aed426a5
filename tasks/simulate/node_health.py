"""How fast a Ray head gives up on a lost node: alignflow's one choice of Ray's GCS
health-check settings, for every head it starts or describes (the simulated cluster here;
`infra/local_cluster.sh` and the KubeRay manifests carry the same values, and tests check
them against this mapping).

Ray's GCS probes each raylet (a gRPC health check of `timeout_ms`), waits `period_ms`
after each answer or failure, and declares the node dead after `failure_threshold`
failures in a row; it reads each setting from `RAY_<name>` in its environment, or from
`_system_config` (which wins) on a head started in-process. A node's actors, bundles and
worker groups are rebuilt only once it is declared dead, so Ray's defaults (3000 / 10000 /
5) left a crashed node's work hanging 12-15 s (its port refuses at once) and a vanished
one (no answer at all) up to 65 s. These values give 1-1.5 s and 16.5 s. The margin
against a false death on a busy machine is the timeout, not the period: a live raylet
would have to leave three probes in a row unanswered for 5 s each (a 16 s stall); CI runs
on 2 busy cores, so the timeout and threshold stay at that floor, while the period (how
soon a refused probe is tried again) went from 1000 to 500 ms, which halved a lost node's
cost in the chaos bench's largest term (measured: bench/node_loss.py, bench/RESULTS.md). Ray's delay
before a new node's first probe (health_check_initial_delay_ms, 5 s) is left as it is: a
node lost in its first seconds is noticed up to that much later.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

PREFIX = "RAY_"
ENV: Mapping[str, str] = MappingProxyType({
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "5000",
    "RAY_health_check_failure_threshold": "3",
})
RAY_DEFAULTS: Mapping[str, str] = MappingProxyType({  # Ray's ray_config_def.h, for the bench
    "RAY_health_check_period_ms": "3000",
    "RAY_health_check_timeout_ms": "10000",
    "RAY_health_check_failure_threshold": "5",
})


def system_config(env: Mapping[str, str] = ENV) -> dict[str, int]:
    """The same settings as a head's `_system_config` (Ray's names, without the prefix)."""
    return {name.removeprefix(PREFIX): int(value) for name, value in env.items()}


def detection_bound_s(env: Mapping[str, str] = ENV, *, refused: bool = True) -> float:
    """The longest a lost node stays alive in Ray's eyes: the probe under way or the wait
    before the next (one period), then `threshold` failures with a period between each.
    A crashed raylet refuses at once (`refused`); a vanished host costs each probe its
    timeout."""
    cfg = system_config(env)
    period, threshold = cfg["health_check_period_ms"], cfg["health_check_failure_threshold"]
    probe = 0 if refused else cfg["health_check_timeout_ms"]
    return (threshold * period + threshold * probe) / 1000
