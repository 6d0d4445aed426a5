"""Names of records in stores written before records had registered names (issue 45).

Older alignflow journalled a record by where its class lived, `module:QualName`, so a store
written then names modules that have moved since. Such a name is read once through this
table: the module's moves (old -> new, as of the day names replaced paths) give the class's
last path, whose class name is its registered name (`names.py`: `alignflow.<QualName>`).
The table is frozen: records are journalled by name now, and a class that moves adds
nothing here. Only a name shaped `alignflow.<module>:<QualName>` is read through it.
"""

from __future__ import annotations

from alignflow.flows.journal.names import OWN

# Modules that moved (old -> new) before records were journalled by name.
MOVED_MODULES = {
    "alignflow.flows.rl_config": "alignflow.flows.rl.config",
    "alignflow.flows.offline_config": "alignflow.flows.offline.config",
    "alignflow.flows.loops_config": "alignflow.flows.loops.config",
    "alignflow.tasks.rl.records": "alignflow.tasks.steps.records",
    "alignflow.tasks.rl.generate": "alignflow.tasks.steps.generate",
    "alignflow.tasks.rl.prompts": "alignflow.tasks.steps.prompts",
    "alignflow.tasks.rl.models:RLModelConfig": "alignflow.tasks.modeling.model_config:RLModelConfig",
    "alignflow.tasks.rl.models:PlacementConfig": "alignflow.tasks.plan.placement:PlacementConfig",
    "alignflow.tasks.steps.placement": "alignflow.tasks.plan.placement",
    "alignflow.tasks.trainers.ds_section:LoraSection": "alignflow.tasks.modeling.lora:LoraConfig",
    "alignflow.tasks.engines.vllm_section": "alignflow.tasks.engines.vllm.config",
    "alignflow.tasks.offline.config:Plan": "alignflow.tasks.trainers.plan:Plan",
    # issue 27: the engine's folders (journal, control, ray), vLLM and DeepSpeed folders
    "alignflow.flows.runs": "alignflow.flows.journal.runs",
    "alignflow.flows.lease": "alignflow.flows.journal.lease",
    "alignflow.flows.timers": "alignflow.flows.journal.timers",
    "alignflow.flows.commit_queue": "alignflow.flows.journal.commit_queue",
    "alignflow.flows.codec": "alignflow.flows.journal.codec",
    "alignflow.flows.identity": "alignflow.flows.journal.identity",
    "alignflow.flows.static_hashes": "alignflow.flows.journal.static_hashes",
    "alignflow.flows.progress_log": "alignflow.flows.journal.progress_log",
    "alignflow.flows.procinfo": "alignflow.flows.journal.procinfo",
    "alignflow.flows.api": "alignflow.flows.control.api",
    "alignflow.flows.runner": "alignflow.flows.control.runner",
    "alignflow.flows.driver": "alignflow.flows.control.driver",
    "alignflow.flows.wrapper": "alignflow.flows.control.wrapper",
    "alignflow.flows.loader": "alignflow.flows.control.loader",
    "alignflow.flows.rerun": "alignflow.flows.control.rerun",
    "alignflow.flows.reconfigure": "alignflow.flows.control.reconfigure",
    "alignflow.flows.planning": "alignflow.flows.control.planning",
    "alignflow.flows.registry": "alignflow.flows.control.registry",
    "alignflow.flows.removal": "alignflow.flows.control.removal",
    "alignflow.flows.heartbeat": "alignflow.flows.control.heartbeat",
    "alignflow.flows.executors": "alignflow.flows.ray.executors",
    "alignflow.flows.groups": "alignflow.flows.ray.groups",
    "alignflow.flows.worker_host": "alignflow.flows.ray.worker_host",
    "alignflow.flows.workers": "alignflow.flows.ray.workers",
    "alignflow.flows.ray_local": "alignflow.flows.ray.local",
    "alignflow.flows.ray_connect": "alignflow.flows.ray.connect",
    "alignflow.flows.ray_pool": "alignflow.flows.ray.pool",
    "alignflow.flows.aliases": "alignflow.flows.compat.aliases",
    "alignflow.flows.shared_steps": "alignflow.flows.rl.shared_steps",
    "alignflow.tasks.engines.vllm": "alignflow.tasks.engines.vllm.engine",
    "alignflow.tasks.engines.vllm_actor": "alignflow.tasks.engines.vllm.actor",
    "alignflow.tasks.engines.vllm_api": "alignflow.tasks.engines.vllm.api",
    "alignflow.tasks.engines.vllm_broadcast": "alignflow.tasks.engines.vllm.broadcast",
    "alignflow.tasks.engines.vllm_config": "alignflow.tasks.engines.vllm.config",
    "alignflow.tasks.engines.vllm_placement": "alignflow.tasks.engines.vllm.placement",
    "alignflow.tasks.engines.vllm_process": "alignflow.tasks.engines.vllm.process",
    "alignflow.tasks.engines.vllm_weights": "alignflow.tasks.engines.vllm.weights",
    "alignflow.tasks.engines.vllm_worker": "alignflow.tasks.engines.vllm.worker",
    "alignflow.tasks.trainers.deepspeed_checkpoint": "alignflow.tasks.trainers.deepspeed.checkpoint",
    "alignflow.tasks.trainers.deepspeed_config": "alignflow.tasks.trainers.deepspeed.config",
    "alignflow.tasks.trainers.deepspeed_trainer": "alignflow.tasks.trainers.deepspeed.trainer",
    "alignflow.tasks.trainers.ds_section": "alignflow.tasks.trainers.deepspeed.section",
    # issue 25: config sections and specs the driver reads, out of the modules that import torch
    "alignflow.tasks.rl.evaluate:RLEvalConfig": "alignflow.tasks.rl.eval_config:RLEvalConfig",
    "alignflow.tasks.rl.evaluate:RLCkptConfig": "alignflow.tasks.rl.eval_config:RLCkptConfig",
    "alignflow.tasks.rl.ptx:PtxConfig": "alignflow.tasks.rl.learn_config:PtxConfig",
    "alignflow.tasks.steps.generate:RolloutConfig": "alignflow.tasks.steps.rollout_config:RolloutConfig",
    "alignflow.tasks.steps.prompts:DataConfig": "alignflow.tasks.data.source:DataConfig",
    "alignflow.tasks.rl.episodes:EpisodeOutput": "alignflow.tasks.rl.async_records:EpisodeOutput",
}


def is_legacy(name: str) -> bool:
    """Is `name` an alignflow module path of an older journal (not a registered name)?"""
    return name.startswith(OWN) and ":" in name


def registered_name(name: str) -> str:
    """The registered name of the record an older journal named `module:QualName`."""
    for _ in range(8):  # a module may have moved more than once
        module, _, qualname = MOVED_MODULES.get(name, name).partition(":")
        moved, name = name, f"{MOVED_MODULES.get(module, module)}:{qualname}"
        if name == moved:
            break
    return OWN + name.partition(":")[2]
