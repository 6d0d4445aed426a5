"""Weight sync: the generation engine gets the policy the last training step produced.

In memory when the engine shares the trainer's process (the CPU default: a copy of
tensors, no disk); from the committed checkpoint otherwise (an engine elsewhere).
"""

from __future__ import annotations

from alignflow.artifacts.scope import current_scope
from alignflow.tasks.steps import rollout_engine
from alignflow.tasks.steps.host_api import Synced


def sync(host: Synced, checkpoint: str, policy_version: int,
         in_memory: bool = True) -> dict[str, int]:
    """Serve policy `policy_version` (saved in `checkpoint`); returns the version served.
    On a data-parallel host rank 0 sends; the other ranks take part in the gathers."""
    host.policy_version = policy_version
    if in_memory:
        host.sync_engine()
    elif rollout_engine.drives(host):
        host.settle()  # the checkpoint may still be on its way to the store
        host.engine.load_checkpoint(current_scope().store, f"{checkpoint}/actor",
                                    version=policy_version)
    if not rollout_engine.drives(host):
        return {"policy_version": policy_version}
    return {"policy_version": host.engine.policy_version}
