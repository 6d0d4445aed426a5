"""Every policy loss runs one GRPO iteration on the tiny model, and each peer's spelling of
it resolves to the same config (`--dry-run`'s config)."""

from __future__ import annotations

from typing import get_args

import pytest

from alignflow.flows.cli.run_config import build_config
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow
from alignflow.tasks.losses.names import PolicyLossType


@pytest.mark.parametrize(("flags", "sets", "name"), [
    (["--actor.policy_loss_type", "cispo"], [], "cispo"),  # OpenRLHF style
    ([], ["loss_type=cispo"], "cispo"),  # TRL's GRPOConfig key in YAML / --set
    ([], ["loss_type=sapo"], "sapo"),
    (["--policy_loss_type", "geo_mean"], [], "gmpo"),  # veRL's loss_mode name
    ([], ["actor.policy_loss_type=vanilla"], "ppo"),
])
def test_peer_spellings_resolve_to_one_config(flags, sets, name):
    assert build_config("grpo", None, sets, flags).actor.policy_loss_type == name


def test_an_unknown_loss_is_refused_in_one_line():
    with pytest.raises(Exception, match="policy_loss_type") as info:
        build_config("grpo", None, [], ["--actor.policy_loss_type", "dapo"])
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", get_args(PolicyLossType))
def test_one_grpo_iteration_per_loss(name, rl_sets, tmp_path):
    flow, cls = load_flow("grpo")
    sets = [*rl_sets, "rollout.batch_size=2", "rollout.n_samples_per_prompt=2",
            "rollout.max_new_tokens=4", "train.batch_size=4", "train.micro_batch_size=4",
            "train.max_iterations=1", f"actor.policy_loss_type={name}",
            "actor.policy_loss.clip_cov_ratio=0.5", "actor.policy_loss.kl_cov_ratio=0.5"]
    out = api.run(flow, load_config(cls, sets=sets), store=str(tmp_path), executor="inline",
                  seed=1, run_id=f"loss-{name}")
    assert out["iterations"] == 1
