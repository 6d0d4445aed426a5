"""The training backend's keys (`ds.*`), per-role workers and colocation, as a user types
them in either OpenRLHF generation: what they select, and the one-line refusals."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.loops.config import IterativeDPOConfig
from alignflow.flows.offline.config import DPOConfig, RMConfig
from alignflow.flows.rl.config import PPOConfig, RLConfig
from alignflow.tasks.plan.placement import Colocation, Workers, host_workers
from alignflow.tasks.trainers.build import build_trainer
from alignflow.tasks.trainers.deepspeed.section import UNAVAILABLE, DSConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer


@pytest.mark.parametrize("cls", [RLConfig, DPOConfig, IterativeDPOConfig])
@pytest.mark.parametrize("flags", [
    ["--zero_stage", "3", "--adam_offload", "--overlap_comm"],
    ["--ds.zero_stage", "3", "--ds.adam_offload", "--ds.overlap_comm"],
])
def test_deepspeed_flags_of_both_generations_select_deepspeed(cls, flags):
    ds = load_config(cls, flags=flags).ds
    assert ds.uses_deepspeed and ds.stage == 3 and ds.adam_offload and ds.overlap_comm


@pytest.mark.parametrize("flags", [
    ["--lora_rank", "8", "--lora_alpha", "32", "--lora_dropout", "0.05",
     "--target_modules", "q_proj", "v_proj"],
    ["--ds.lora.rank", "8", "--ds.lora.alpha", "32", "--ds.lora.dropout", "0.05",
     "--ds.lora.target_modules", "q_proj", "v_proj"],
])
def test_lora_flags_of_both_generations(flags):
    ds = load_config(DPOConfig, flags=flags).ds
    lora = ds.lora
    assert (lora.rank, lora.alpha, lora.dropout) == (8, 32, 0.05)
    assert lora.target_modules == ("q_proj", "v_proj") and not ds.load_in_4bit


def test_trainer_choice():
    assert not DSConfig().uses_deepspeed and not DSConfig().lora.enabled
    assert DSConfig(trainer="deepspeed").stage == 2  # OpenRLHF's default stage
    assert DSConfig(zero_stage=0).uses_deepspeed
    assert not DSConfig(trainer="torch").uses_deepspeed


def test_the_default_backend_builds_the_torch_trainer(tiny_model_dir):
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.base import TrainerConfig

    assert isinstance(build_trainer(load_causal_lm(str(tiny_model_dir)), TrainerConfig()),
                      TorchTrainer)


@pytest.mark.parametrize(("cls", "sets", "message"), [
    (RLConfig, ["ds.trainer=torch", "ds.zero_stage=2"],
     "config key 'ds.zero_stage': expected null with trainer=torch"),
    (RLConfig, ["ds.adam_offload=true"], "config key 'ds.adam_offload': expected false "
     "without DeepSpeed"),
    (RLConfig, ["ds.zero_stage=0", "ds.adam_offload=true"], "'ds.adam_offload': expected "
     "false with zero_stage=0"),
    (RLConfig, ["ds.zero_stage=4"], "'ds.zero_stage': expected 0, 1, 2, 3 or null"),
    (RLConfig, ["ds.load_in_4bit=true"], "'ds.load_in_4bit': expected false unless "
     "ds.lora.rank > 0"),
    (RLConfig, ["ds.grad_accum_dtype=bf16"], "'ds.grad_accum_dtype': expected fp32 or null"),
    (DPOConfig, ["ds.lora.rank=-1"], "'ds.lora.rank': expected an integer >= 0"),
    (RMConfig, ["ds.lora.rank=4"], "'ds.lora.rank': expected 0 for rm"),
])
def test_backend_errors_name_the_key(cls, sets, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_config(cls, sets=sets)


@pytest.mark.parametrize(("flag", "key"), [
    ("--deepcompile", "deepcompile"), ("--ds_tensor_parallel_size=2", "tensor_parallel_size"),
    ("--ring_attn_size=2", "ring_attn_size"), ("--ring_head_stride=2", "ring_attn_head_stride"),
    ("--use_ds_universal_ckpt", "use_universal_ckpt"),
    ("--zpg=2", "zpg"),
])
def test_unavailable_deepspeed_knobs_are_refused_with_the_reason(flag, key):
    with pytest.raises(ConfigError) as err:
        load_config(RLConfig, flags=[flag])
    assert f"config key 'ds.{key}': not available: {UNAVAILABLE[key][1]}" in str(err.value)
    load_config(RLConfig, flags=[f"--ds.{key}={UNAVAILABLE[key][0]}"])  # the default is fine


def test_role_workers_of_both_generations():
    old = load_config(PPOConfig, flags=["--actor_num_nodes", "2", "--actor_num_gpus_per_node",
                                        "2", "--critic_num_gpus_per_node", "4",
                                        "--ref_num_nodes", "2", "--reward_num_gpus_per_node", "2"])
    new = load_config(PPOConfig, flags=["--actor.num_nodes", "2", "--actor.num_gpus_per_node",
                                        "2", "--critic.num_gpus_per_node", "4",
                                        "--ref.num_nodes", "2", "--reward.num_gpus_per_node", "2"])
    for cfg in (old, new):
        assert (cfg.actor.workers, cfg.critic.workers, cfg.ref.workers, cfg.reward.workers) \
            == (4, 4, 2, 2)
    with pytest.raises(ConfigError, match="'train.batch_size': expected a multiple of the 3 "
                                          "workers of actor"):
        load_config(RLConfig, sets=["actor.num_gpus_per_node=3"])
    with pytest.raises(ConfigError, match="'placement.num_nodes': expected an integer >= 1"):
        load_config(DPOConfig, sets=["placement.num_nodes=0"])


def test_a_host_takes_its_trained_roles_workers():
    sections = {"actor": Workers(num_gpus_per_node=2), "ref": Workers(num_nodes=3),
                "reward": Workers(), "critic": Workers(num_nodes=2)}
    assert host_workers(("actor", "ref", "reward"), sections).workers == 2
    assert host_workers(("critic", "reward"), sections).num_nodes == 2
    assert host_workers(("ref", "reward"), sections).workers == 3


ROLES = ("actor", "ref", "critic", "reward")


@pytest.mark.parametrize(("flags", "hosts"), [
    ([], {"models": ROLES}),  # alignflow's CPU default: one host
    (["--colocate_all_models"], {"models": ROLES}),
    (["--colocate_actor_ref"], {"actor": ("actor", "ref"), "critic": ("critic",),
                                "reward": ("reward",)}),
    (["--colocate_critic_reward"], {"actor": ("actor",), "ref": ("ref",),
                                    "critic": ("critic", "reward")}),
    (["--colocate_actor_ref", "--colocate_critic_reward"],
     {"actor": ("actor", "ref"), "critic": ("critic", "reward")}),
    (["--train.colocate_all=false"], {r: (r,) for r in ROLES}),
    (["--colocate_all_models", "--colocate_actor_ref"], {"models": ROLES}),
])
def test_colocation_flags_keep_their_meaning(flags, hosts):
    cfg = load_config(PPOConfig, flags=flags)
    assert cfg.train.hosts(ROLES) == hosts
    assert {r: cfg.train.host_of(r) for r in ROLES} == {r: h for h, rs in hosts.items()
                                                        for r in rs}
    assert Colocation().all_in_one
