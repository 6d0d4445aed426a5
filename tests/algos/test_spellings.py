"""Each new key resolves to one config whichever peer's spelling names it: OpenRLHF 0.11's
flags (`--actor.optim muon`, `--actor.muon.no_nesterov`, `--optim muon`,
`--algo.advantage.estimator flash_reinforce`) and alignflow's dotted `--set` keys."""

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.loader import load_flow


def _cfg(flow, sets=(), flags=None):
    return load_config(load_flow(flow)[1], sets=list(sets), flags=flags)


def test_actor_muon_flags_and_sets_agree():
    flags = _cfg("grpo", flags=["--actor.optim", "muon", "--actor.muon.lr", "1e-4",
                                "--actor.muon.momentum", "0.9", "--actor.muon.no_nesterov",
                                "--actor.max_norm", "0"])
    sets = _cfg("grpo", ["actor.optim=muon", "actor.muon.lr=1e-4", "actor.muon.momentum=0.9",
                         "actor.muon.nesterov=false", "actor.max_norm=0"])
    assert flags == sets
    trainer = sets.actor.trainer_config(1, sets.train, sets.ds)
    assert (trainer.optim, trainer.muon_lr, trainer.muon_momentum, trainer.muon_nesterov) == \
        ("muon", 1e-4, 0.9, False)
    assert sets.critic.optim == "adam"


def test_sft_muon_flags_and_sets_agree():
    assert _cfg("sft", flags=["--optim", "muon", "--muon.lr", "0.01"]) == \
        _cfg("sft", ["optim=muon", "muon.lr=0.01"])


def test_flash_reinforce_estimator_spellings_agree():
    sets = ["rollout.max_new_tokens=64"]
    by_flow = _cfg("flash_reinforce", sets)
    by_flag = _cfg("grpo", [*sets, "rollout.n_samples_per_prompt=1", "train.async_enable=true"],
                   flags=["--algo.advantage.estimator", "flash_reinforce"])
    assert by_flow.algo == by_flag.algo and by_flow.rollout == by_flag.rollout
    assert by_flow.train == by_flag.train


def test_unknown_optimizer_is_one_line():
    with pytest.raises(ConfigError, match="optim"):
        _cfg("grpo", ["actor.optim=lion"])


def test_teacher_spellings_agree():
    """OpenRLHF's (train_kd's) `--teacher_model`, TRL's `teacher_model_name_or_path`, the key."""
    by_key = _cfg("on_policy_distill", ["teacher.model_name_or_path=tiny-llama"])
    assert _cfg("on_policy_distill", flags=["--teacher_model", "tiny-llama"]) == by_key
    assert _cfg("on_policy_distill", flags=["--teacher_model_name_or_path", "tiny-llama"]) == \
        by_key
