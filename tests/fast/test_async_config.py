"""The `async`, `agent` and `algo.advantage` keys: canonical names, OpenRLHF's flags of both
generations, and the combinations refused at once."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.config.build import from_dict, to_dict
from alignflow.flows.rl.config import RLConfig


def _cfg(sets=(), flags=None) -> RLConfig:
    """Async runs need a response length (OpenRLHF's default is none: max_len decides)."""
    return load_config(RLConfig, sets=["rollout.max_new_tokens=128", *sets], flags=flags)


def test_synchronous_by_default():
    cfg = _cfg()
    assert cfg.staleness == 0 and not cfg.uses_generator
    assert cfg.checkpoints_kept == cfg.ckpt.max_num


@pytest.mark.parametrize("flags,staleness,partial", [
    (["--async_train"], 1, False),                                   # OpenRLHF 0.9
    (["--async_train", "--async_queue_size", "2", "--partial_rollout"], 2, True),
    (["--train.async_enable", "--train.async_queue_size", "3",       # OpenRLHF 0.11
      "--train.partial_rollout_enable"], 3, True),
    (["--async.max_staleness", "2"], 2, False),                      # alignflow's key
    (["--async_queue_size", "2"], 0, False),  # as in OpenRLHF: the size alone is not async
])
def test_openrlhf_async_flags(flags, staleness, partial):
    cfg = _cfg(flags=flags)
    assert (cfg.staleness, cfg.train.partial_rollout_enable) == (staleness, partial)
    assert cfg.uses_generator == (staleness > 0)
    assert cfg.checkpoints_kept >= (staleness + 3 if staleness else 2)


def test_the_async_key_round_trips_through_run_metadata():
    cfg = _cfg(["async.max_staleness=2", "async.on_stale=drop"])
    data = to_dict(cfg)
    assert data["async"]["max_staleness"] == 2 and "async_" not in data
    assert from_dict(RLConfig, data) == cfg


def test_is_correction_keys_of_both_generations():
    new = _cfg(flags=["--algo.advantage.is_correction_enable", "--algo.advantage."
                      "is_correction_type", "icepop", "--algo.advantage.is_correction_threshold",
                      "0.5", "2.0"])
    old = _cfg(flags=["--enable_vllm_is_correction", "--vllm_is_correction_type", "icepop",
                      "--vllm_is_truncated_threshold", "0.5", "2.0"])
    assert new.algo.advantage == old.algo.advantage
    assert old.algo.advantage.is_correction_threshold == (0.5, 2.0)


def test_agent_flags_of_both_generations(tmp_path):
    path = str(tmp_path / "agent.py")
    assert _cfg(flags=["--agent_func_path", path]).train.agent_func_path == path
    cfg = _cfg(flags=["--train.agent_func_path", path])
    assert cfg.uses_generator and cfg.staleness == 0


@pytest.mark.parametrize("sets,match", [
    (["train.partial_rollout_enable=true"], "needs an asynchronous run"),
    (["async.max_staleness=-1"], "expected an integer >= 0"),
    (["train.async_enable=true", "async.max_staleness=0"], "needs a bound >= 1"),
    (["async.max_staleness=1", "async.generator_worker=false"], "a worker of their own"),
    (["async.replay_schedule=r1", "async.max_staleness=1"], "set train.partial_rollout_enable"),
    (["train.agent_func_path=env.txt"], "expected a .py file"),
    (["train.agent_func_path=env.py", "async.max_staleness=1",
      "train.partial_rollout_enable=true"], "not generated in segments"),
    (["algo.advantage.is_correction_threshold=[2.0, 1.0]"], "low < high"),
    (["algo.advantage.is_correction_type=clip"], "one of"),
    (["agent.max_turns=0"], "agent.max_turns"),
])
def test_bad_combinations_fail_at_once(sets, match):
    with pytest.raises(ConfigError, match=match):
        _cfg(sets)


def test_segment_length_defaults_to_a_quarter_of_the_budget():
    cfg = _cfg(["async.max_staleness=1", "train.partial_rollout_enable=true",
                "rollout.max_new_tokens=10"])
    assert cfg.async_.segment_length(10) == 3
    assert _cfg(["async.max_staleness=1", "train.partial_rollout_enable=true",
                 "async.segment_tokens=50"]).async_.segment_length(10) == 10


def test_a_resumed_run_gets_its_async_settings_back():
    """run.json holds the config as the codec writes it (attribute names: `async_`)."""
    from alignflow.flows.journal import codec
    from alignflow.flows.trust.config import decode_config

    cfg = _cfg(["async.max_staleness=2", "train.partial_rollout_enable=true"])
    meta = {"run_id": "r1", "config": codec.encode(cfg)}
    assert decode_config(meta, RLConfig) == cfg


def test_ppo_refuses_what_it_does_not_run():
    from alignflow.flows.rl.config import PPOConfig

    with pytest.raises(ConfigError, match="ppo runs synchronously"):
        load_config(PPOConfig, sets=["train.async_enable=true", "rollout.max_new_tokens=64"])
