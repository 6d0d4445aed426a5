"""The CPU priority of the Ray workers alignflow starts: the driver's own.

Ray lowers every worker it starts by `worker_niceness` (`RAY_CONFIG(int, worker_niceness,
15)` in Ray's src/ray/common/ray_config_def.h; the core worker calls `nice()` with it once
initialised, src/ray/core_worker/core_worker.cc, for every worker that is not a driver).
`nice()` adds to the priority the worker inherited from its raylet, which inherited the
driver's. alignflow's model work (data preparation, generate, learn) runs in such a worker,
so at 15 it got a CFS weight of 36 against a busy neighbour's 1024 (issue 46). A node
alignflow starts passes 0 instead, so its workers run at the driver's priority; a user who
set Ray's own `RAY_worker_niceness` keeps that value.

Ray reads the setting from `RAY_worker_niceness` and from a head's `_system_config`, which
wins (`Node._resolve_ray_config` in ray/_private/node.py says so); non-head nodes take the
head's system config from the GCS.
"""

from __future__ import annotations

import os

from alignflow.errors import ConfigError

ENV = "RAY_worker_niceness"  # Ray's own name (ray_constants.RAY_WORKER_NICENESS)


def worker_niceness() -> int:
    """What to pass as `_system_config["worker_niceness"]`: the user's `RAY_worker_niceness`,
    else 0 (the driver's priority)."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 19:
        raise ConfigError(f"{ENV}={raw!r}: expected an integer from 0 (the driver's "
                          "priority) to 19 (the lowest), Ray's range for an unprivileged "
                          "user; unset it for alignflow's default, 0")
    return value
