"""The promotion gate's evaluation of one policy (`gate.py`): generate on the fixed
prompts, score, read the metric. A task body, run where the model is loaded; the driver
names it (`steps.py`) without importing this module's torch and transformers."""

from __future__ import annotations

import functools

from alignflow.artifacts.scope import current_scope
from alignflow.flows.campaign.config import GateConfig
from alignflow.flows.campaign.models import policy_folder
from alignflow.flows.campaign.records import Policy, Score
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.rewards.registry import RewardConfig, build_reward
from alignflow.tasks.steps.generate import RolloutConfig, generate
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.score import score
from alignflow.tasks.zoo.registry import resolve_model


class EvalHost:
    """What the generate and score steps need from a host: tokenizer, engine, reward."""

    def __init__(self, folder: str, gate: GateConfig) -> None:
        self.folder, self.gate = folder, gate

    @functools.cached_property
    def tokenizer(self):
        return load_tokenizer(self.folder, padding_side="left")

    @functools.cached_property
    def engine(self) -> HFEngine:
        model = load_causal_lm(self.folder, dtype="fp32")
        return HFEngine(model, self.tokenizer, micro_rollout_batch_size=8)

    @functools.cached_property
    def reward(self):
        return build_reward(RewardConfig(sources=self.gate.rewards))

    def idle(self, role: str) -> None:
        """Nothing is offloaded: the host lives for one evaluation."""

    def ensure_engine_synced(self) -> None:
        """The engine serves the policy folder it was built from: nothing to sync."""

    def engine_idle(self) -> None:
        """An HF engine holds nothing to release between evaluations."""


def evaluate(policy: Policy, prompts: StepOutput, iteration: int, gate: GateConfig) -> Score:
    """Generate on the eval prompts with `policy`, score, and read the gate's metric."""
    folder = resolve_model(policy_folder(current_scope().store, policy))
    host = EvalHost(folder, gate)
    cfg = RolloutConfig(batch_size=prompts.rows, n_samples_per_prompt=gate.n_samples_per_prompt,
                        max_new_tokens=gate.max_new_tokens, temperature=gate.temperature)
    rollouts = generate(host, prompts, iteration, cfg)
    scores = score(host, rollouts, iteration)
    metrics = {**rollouts.metrics, **scores.metrics}
    return Score(Score(0.0, metrics, iteration).of(gate.metric), metrics, iteration)
