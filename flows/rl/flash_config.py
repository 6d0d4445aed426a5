"""FlashREINFORCE (OpenRLHF v0.11.2, `--algo.advantage.estimator flash_reinforce`): the
critic-free GRPO loop with one sample per prompt, the rollout batch's mean reward as the
baseline, no whitening (`tasks/advantages/flash.py`), and asynchronous generation by
default: the generator worker runs one batch ahead through the durable buffer, exactly as
asynchronous GRPO (`flows/rl/rollouts.py`: each batch committed, consumed once, resumed
bitwise). The PPO clip on the ratio to the behaviour log-probs is the trust region.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.flows.rl.config import RLConfig, RLTrainConfig, _estimator
from alignflow.tasks.rl.learn_config import AlgoConfig
from alignflow.tasks.steps.rollout_config import RolloutConfig


def _async_train() -> RLTrainConfig:
    return RLTrainConfig(async_enable=True)


def _one_sample() -> RolloutConfig:
    return RolloutConfig(n_samples_per_prompt=1, max_new_tokens=1024)  # async: a number


@dataclass(frozen=True, kw_only=True)
class FlashReinforceConfig(RLConfig):
    """FlashREINFORCE: one sample per prompt, batch-mean baseline, asynchronous."""

    algo: AlgoConfig = field(default_factory=_estimator("flash_reinforce"))
    train: RLTrainConfig = field(default_factory=_async_train)
    rollout: RolloutConfig = field(default_factory=_one_sample)
