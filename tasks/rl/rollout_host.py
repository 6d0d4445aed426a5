"""The generator worker of an asynchronous run: a process holding only a generation engine.

Every generation task names the policy it must sample with (`PolicyRef`); the host loads
those weights from the learner's committed checkpoint when its engine holds another
version. So the weights a batch was sampled with follow from the task's inputs alone — not
from which weight pushes happened to reach the worker first — and a restarted or resumed
worker needs nothing restored.
"""

from __future__ import annotations

import functools

import torch

from alignflow.artifacts.checkpoints import load_model_state
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.modeling.device import host_device
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.rl.async_records import PolicyRef
from alignflow.tasks.rl.rollout_spec import RolloutSpec
from alignflow.tasks.steps.rollout_engine import build_vllm
from alignflow.tasks.zoo.registry import resolve_model


class RolloutHost:
    """Tokenizer + engine; `use_policy` switches the engine to the weights a task names."""

    def __init__(self, spec: RolloutSpec) -> None:
        self.spec = spec
        self.loaded = PolicyRef(0, None)  # the weights in the engine
        self.loads = 0  # weight loads so far
        if spec.num_threads:
            torch.set_num_threads(spec.num_threads)

    @functools.cached_property
    def tokenizer(self):
        return load_tokenizer(resolve_model(self.spec.pretrain), padding_side="left")

    @functools.cached_property
    def engine(self):
        """HF or vLLM, as the plan says, on this worker's GPU where the plan gave one."""
        planned, plan = self.spec.plan.engine, self.spec.plan
        path = resolve_model(self.spec.pretrain)
        device = host_device(plan.gpus_per_worker, first_gpu=plan.first_gpu,  # set first
                             kind="generator")
        if planned.kind == "vllm":
            return build_vllm(planned, self.spec.engines, str(path), policy_version=0)
        model = load_causal_lm(path, dtype=self.spec.dtype).to(device)
        return HFEngine(model, self.tokenizer,
                        micro_rollout_batch_size=self.spec.micro_rollout_batch_size)

    @functools.cached_property
    def agent(self):
        """The user's OpenRLHF-style `AgentExecutor` (multi-turn episodes), built once."""
        from alignflow.tasks.agents.loader import load_agent_executor

        assert self.spec.agent_func_path, "agent episodes without an agent file"
        return load_agent_executor(self.spec.agent_func_path)

    @property
    def policy_version(self) -> int:
        return self.engine.policy_version

    def use_policy(self, store, policy: PolicyRef) -> None:
        """Make the engine sample with `policy` (a no-op when it already does)."""
        engine = self.engine
        if policy == self.loaded:
            return
        if policy.checkpoint is None:
            path = resolve_model(self.spec.pretrain)
            state = load_causal_lm(path, dtype=self.spec.dtype).state_dict()
        else:
            state = load_model_state(store, f"{policy.checkpoint}/actor")
        engine.update_weights(state.items(), version=policy.version)
        self.loaded, self.loads = policy, self.loads + 1

    def restore(self, store, folder: str) -> None:
        """Nothing to restore: each task names the weights it samples with."""
