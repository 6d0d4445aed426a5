"""Weight sync: the generation engine gets the policy the last learn step produced.

In memory when the engine shares the trainer's process (the CPU default: a copy of
tensors, no disk); from the committed checkpoint otherwise (an engine elsewhere).
"""

from __future__ import annotations

from alignflow.artifacts.scope import current_scope
from alignflow.tasks.rl.records import LearnOutput


def sync(host, learn: LearnOutput, in_memory: bool = True) -> dict[str, int]:
    """Returns the policy version the engine now serves."""
    host.policy_version = learn.policy_version
    if in_memory:
        host.sync_engine()
    else:
        host.engine.load_checkpoint(current_scope().store, f"{learn.checkpoint}/actor",
                                    version=learn.policy_version)
    return {"policy_version": host.engine.policy_version}
