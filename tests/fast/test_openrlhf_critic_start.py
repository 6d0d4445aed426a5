"""The PPO critic starts where OpenRLHF starts it, and computes the values it computes.

Reference: OpenRLHF v0.11.0 `cli/train_ppo_ray.py` (the same rule from v0.5 to v0.11):

    if estimator != "gae": critic = None
    elif critic is None: critic = reward_pretrain.split(",")[0] if not remote_rm_url
                                  else pretrain

and `models/model.py`'s critic: values = (v − mean)/std with mean/std from its config.json
(0 and 1 without them) when --normalize_reward.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from alignflow.flows.rl.config import PPOConfig
from alignflow.tasks.modeling.critic import Critic
from alignflow.tasks.rewards.model_rm import ModelRewardModel
from alignflow.tasks.rl.learn_config import RLRewardConfig
from alignflow.tasks.rl.roles import ActorConfig, CriticConfig
from tests.tolerance import network_bound


def openrlhf_critic(critic: str | None, reward_pretrain: str | None, remote_rm_url: str | None,
                    pretrain: str) -> str:
    if critic is not None:
        return critic
    return reward_pretrain.split(",")[0] if not remote_rm_url else pretrain


@pytest.mark.parametrize(("critic", "rm", "remote"), [
    (None, "tiny-llama-rm", None), (None, "tiny-llama-rm,other-rm", None),
    (None, None, "http://rm:5000/get_reward"), (None, "tiny-llama-rm", "reward.py"),
    ("tiny-llama", "tiny-llama-rm", None)])
def test_the_critic_starts_from_the_first_reward_model(critic, rm, remote):
    cfg = PPOConfig(actor=ActorConfig(model_name_or_path="tiny-llama"),
                    critic=CriticConfig(model_name_or_path=critic),
                    reward=RLRewardConfig(model_name_or_path=rm, remote_url=remote))
    assert cfg.critic_start == openrlhf_critic(critic, rm, remote, "tiny-llama")


def test_without_any_reward_model_the_critic_starts_from_the_actor():
    """alignflow's default reward is a rule (OpenRLHF has none and would fail): the actor."""
    cfg = PPOConfig(actor=ActorConfig(model_name_or_path="tiny-llama"))
    assert cfg.critic_start == "tiny-llama"


def _last_values(critic: Critic, rm: ModelRewardModel, texts: list[str]) -> torch.Tensor:
    enc = rm.tokenizer(texts, return_tensors="pt", padding=True)
    values = critic.token_values(enc["input_ids"], enc["attention_mask"])
    last = enc["attention_mask"].shape[1] - 1 - enc["attention_mask"].flip(1).argmax(1)
    return values[torch.arange(len(texts)), last]


@pytest.mark.parametrize("normalize", [False, True])
def test_a_critic_from_the_reward_model_values_a_text_as_the_model_scores_it(
        tiny_rm_dir, tmp_path, normalize):
    folder = tmp_path / "rm"
    shutil.copytree(tiny_rm_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"mean": 0.5, "std": 4.0}))
    rm = ModelRewardModel(folder, normalize=normalize)
    texts = ["the cat sat", "a longer answer with more words in it"]
    expected = rm.score(texts, [""] * 2, [None] * 2).rewards
    got = _last_values(Critic.from_pretrained(str(folder), normalize=normalize), rm, texts)
    assert torch.allclose(got, expected, rtol=0,
                          atol=network_bound(rm.model.config, expected.abs().max()))
