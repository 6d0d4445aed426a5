"""Dynamic filtering decides on OpenRLHF's `scores`, not on the (shaped) reward.

The reference is OpenRLHF v0.11.0 (`trainer/ppo_utils/samples_generator.py`,
`_generate_vllm`; `utils/agent.py`, `SingleTurnAgentExecutor.execute`): a sample's score is
its reward function's `scores` (its `rewards` when it gives none), and a prompt's group is
kept when min < mean(score) < max.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch

from alignflow.tasks.rewards.base import RewardOutput
from alignflow.tasks.rewards.combine import CombinedReward
from alignflow.tasks.rl.experience import Experience, compute
from alignflow.tasks.rl.learn_config import (
    AlgoConfig,
    EstimatorConfig,
    LearnSettings,
    RLRewardConfig,
)
from alignflow.tasks.rl.roles import ActorConfig, CriticConfig
from alignflow.tasks.trainers.optim import TrainConfig


def openrlhf_kept(infos: list[dict], n: int, low: float, high: float) -> list[bool]:
    """OpenRLHF v0.11.0: score = info["scores"], else info["rewards"]; per group of n,
    keep iff low < mean < high (one flag per sample)."""
    kept = []
    for g in range(0, len(infos), n):
        scores = [i["scores"] if i.get("scores") is not None else i["rewards"]
                  for i in infos[g:g + n]]
        avg = sum(scores) / len(scores)
        kept += [low < avg < high] * n
    return kept


class _Shaped:
    """A reward function that shapes its reward (format bonus / penalty) and gives its 0/1
    correctness as `scores`, as OpenRLHF's reward functions do."""

    def __init__(self, rewards: list[float], scores: list[float] | None) -> None:
        self.rewards, self.scores = rewards, scores

    def score(self, queries, prompts, labels) -> RewardOutput:
        given = {} if self.scores is None else {"score": torch.tensor(self.scores)}
        return RewardOutput(torch.tensor(self.rewards), given)


def _kept(out: RewardOutput, n: int) -> list[bool]:
    rows = len(out.rewards)
    exp = Experience(keys=pa.table({"k": list(range(rows))}), prompts=[[1]] * rows,
                     responses=[[2, 3]] * rows, old_logp=torch.zeros(rows, 2), ref_logp=None,
                     mask=torch.ones(rows, 2), reward=out.rewards, values=None,
                     filter_score=out.filter_scores)
    algo = AlgoConfig(advantage=EstimatorConfig(estimator="rloo"),
                      dynamic_filtering_enable=True)
    settings = LearnSettings(algo=algo, actor=ActorConfig(), critic=CriticConfig(),
                             reward=RLRewardConfig(), train=TrainConfig(), packing=False,
                             n_samples=n, temperature=1.0, max_len=8)
    return compute(exp, settings, kl_coef=0.0, moments=None).kept.tolist()


def test_a_shaped_reward_is_filtered_on_its_scores():
    # group 0: rewards (1, 1) (a format bonus on a wrong answer) but scores (0, 1): kept;
    # group 1: rewards (0.2, 0.6) but scores (1, 1), all right: dropped. On the reward
    # alone the decisions would be the opposite.
    rewards, scores = [1.0, 1.0, 0.2, 0.6], [0.0, 1.0, 1.0, 1.0]
    out = CombinedReward({"f": _Shaped(rewards, scores)}).score(["q"] * 4, ["p"] * 4, [""] * 4)
    infos = [{"rewards": r, "scores": s} for r, s in zip(rewards, scores, strict=True)]
    assert _kept(out, 2) == openrlhf_kept(infos, 2, 0.0, 1.0) == [True, True, False, False]


def test_without_scores_the_reward_decides():
    rewards = [1.0, 1.0, 0.0, 1.0]
    out = CombinedReward({"f": _Shaped(rewards, None)}).score(["q"] * 4, ["p"] * 4, [""] * 4)
    infos = [{"rewards": r} for r in rewards]
    assert _kept(out, 2) == openrlhf_kept(infos, 2, 0.0, 1.0) == [False, False, True, True]


def test_an_older_run_without_filter_scores_filters_on_the_reward():
    out = RewardOutput(torch.tensor([1.0, 1.0, 0.0, 1.0]))
    assert _kept(out, 2) == [False, False, True, True]


def test_weighted_sources_filter_on_the_weighted_scores():
    out = CombinedReward({"a": _Shaped([5.0, 5.0], [0.0, 1.0]), "b": _Shaped([0.0, 0.0], None)},
                         weights={"a": 0.5, "b": 1.0}).score(["q"] * 2, ["p"] * 2, [""] * 2)
    assert out.filter_scores.tolist() == [0.0, 0.5]
    assert out.rewards.tolist() == [2.5, 2.5]


def test_an_agent_episode_is_filtered_on_its_scores():
    """OpenRLHF's agents: `step_result.get("scores", total_reward)` (utils/agent.py)."""
    from alignflow.tasks.agents.runner import check_episode
    from alignflow.tasks.rl.episodes import _scores

    def episode(**out):
        return check_episode({"observation_tokens": [1, 2, 3], "action_ranges": [(1, 3)],
                              "rollout_log_probs": [0.0] * 3, "turns": [], **out}, "e", None)
    eps = [episode(reward=-0.5, scores=1.0), episode(reward=0.25)]
    keys = {"run_id": ["r"] * 2, "iteration": [0] * 2, "task_key": ["t"] * 2,
            "prompt_id": ["0"] * 2, "sample_idx": [0, 1]}
    assert _scores(keys, eps).column("filter_score").to_pylist() == [1.0, 0.25]


def test_a_refilled_batch_keeps_the_first_passing_groups():
    from alignflow.tasks.rl.experience import first_groups

    rewards = [0.0, 0.0, 0.5, 0.5, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5]  # group means 0 .5 1 .5 .5
    rows = len(rewards)
    exp = Experience(keys=pa.table({"k": list(range(rows))}), prompts=[[i] for i in range(rows)],
                     responses=[[2]] * rows, old_logp=torch.zeros(rows, 1), ref_logp=None,
                     mask=torch.ones(rows, 1), reward=torch.tensor(rewards), values=None)
    kept, metrics = first_groups(exp, 2, 2, 0.0, 1.0)
    assert [p[0] for p in kept.prompts] == [2, 3, 6, 7]  # groups 1 and 3; group 4 not needed
    assert kept.keys.column("k").to_pylist() == [2, 3, 6, 7]
    assert metrics["rollout/dynamic_filtering_pass_rate"] == 60.0  # 3 of 5 groups pass
    short, _ = first_groups(exp, 2, 4, 0.0, 1.0)  # prompts ran out: failing groups fill up
    assert [p[0] for p in short.prompts] == [0, 1, 2, 3, 6, 7, 8, 9]


def test_over_sampling_keys_and_flags():
    from alignflow.flows.cli.run_config import build_config

    on = ["--dynamic_filtering", "--vllm_generate_batch_size", "16", "--rollout_batch_size", "8"]
    cfg = build_config("grpo", None, [], on)
    assert (cfg.rollout.prompts_per_round, cfg.refills, cfg.learn.keep_groups) == (16, True, 8)
    cfg = build_config("grpo", None, [], ["--rollout.vllm_generate_batch_size", "16",
                                          "--rollout.batch_size", "8",
                                          "--algo.dynamic_filtering_enable"])
    assert cfg.rollout.vllm_generate_batch_size == 16
    with pytest.raises(Exception, match="vllm_generate_batch_size"):
        build_config("grpo", None, [], on[1:])  # over-sampling without the filter
    with pytest.raises(Exception, match="vllm_generate_batch_size"):
        build_config("grpo", None, [], [*on[:2], "4", *on[3:]])  # fewer than batch_size
