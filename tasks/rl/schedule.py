"""The recorded schedule of a partial-rollout run: which policy version sampled each segment.
Reads: another run's committed manifests (numbers only; nothing in them is imported)."""

from __future__ import annotations

import re

from alignflow.artifacts.commit import manifests
from alignflow.artifacts.scope import current_scope
from alignflow.errors import ConfigError

SEGMENT_KEY = re.compile(r"^iter-\d{4}/generate-s\d{2}$")


def recorded_versions(run_id: str) -> dict[str, int]:
    """Segment task key -> the policy version that segment of run `run_id` sampled with."""
    store = current_scope().store
    found: dict[str, int] = {}
    for _, manifest in manifests(store, run_id):
        task_key = manifest.get("task_key", "")
        if SEGMENT_KEY.match(task_key) and manifest.get("status") == "SUCCESSFUL":
            fields = (manifest.get("output") or {}).get("fields") or {}
            version = fields.get("policy_version")
            if not isinstance(version, int):
                raise ConfigError(f"async.replay_schedule={run_id!r}: segment {task_key!r} "
                                  "records no integer policy_version")
            found[task_key] = version
    if not found:
        raise ConfigError(f"async.replay_schedule={run_id!r}: that run (in {store.url}) has "
                          "no committed partial-rollout segments to replay")
    return found
