"""A colocated role that asks for fewer workers than its host's (e.g. `--ref.num_gpus_per_node
2` with `--colocate_all_models` and 8 actor GPUs). OpenRLHF's launcher
(`cli/train_ppo_ray.py:train`, `trainer/ray/launcher.py:RayActorGroup`, at 3c3be623):
asserts a reference colocated with the actor (colocate_all or colocate_actor_ref, KL on) and
a reward model colocated with the critic (colocate_critic_reward) the same num_nodes and
num_gpus_per_node, refusing the run; gives a critic or reward model on the actor's
placement group (colocate_all) a group of its own size on the first bundles of it (rank r
on bundle r). alignflow runs every role of a host on each of the host's workers (one
process per worker holds them all), so the role runs on all of them: a deliberate
difference, said in one `note:` line of the dry run. No Ray, no GPU."""

from __future__ import annotations

import pytest

from alignflow.cli import main
from alignflow.tasks.plan import rules

BASE = ["--set", "rollout.max_new_tokens=64", "--set", "train.batch_size=128",
        "--set", "rollout.batch_size=64", "--train.colocate_all", "--actor.num_gpus_per_node",
        "8", "--ref.num_gpus_per_node", "8", "--algo.kl.init_coef", "0.01"]


@pytest.fixture(autouse=True)
def no_vllm_here(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    monkeypatch.setattr(rules, "vllm_openmp_loaded", lambda: False)


def _dry(capsys, flow: str, *flags: str) -> tuple[list[str], list[str]]:
    assert main(["run", flow, "--dry-run", "--cluster", "1x8", *BASE, *flags]) == 0
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("  models "))
    return row.split(), [line for line in out if ".num_gpus_per_node = " in line]


def test_a_smaller_colocated_reference_runs_on_every_actor_gpu_and_says_so(capsys):
    row, said = _dry(capsys, "grpo", "--ref.num_gpus_per_node", "2")
    assert row[1:5] == ["actor,", "ref,", "reward", "1×8"]  # one host, 8 workers
    assert said == ["note: ref.num_nodes × ref.num_gpus_per_node = 1×2: the ref runs on all "
                    "1×8 workers of host models (each holds all the host's roles); OpenRLHF "
                    "refuses a colocated ref of another size (it asserts the same num_nodes "
                    "and num_gpus_per_node)"]


def test_a_smaller_critic_on_the_actor_gpus_is_said_as_openrlhf_places_it(capsys, tiny_rm_dir):
    _row, said = _dry(capsys, "ppo", "--critic.num_gpus_per_node", "2",
                      "--reward.num_gpus_per_node", "8", "--reward.model_name_or_path",
                      str(tiny_rm_dir))
    assert said == ["note: critic.num_nodes × critic.num_gpus_per_node = 1×2: the critic "
                    "runs on all 1×8 workers of host models (each holds all the host's "
                    "roles); OpenRLHF runs its 2 worker(s) on the first 2 of the shared GPUs"]


def test_equal_sizes_and_rule_rewards_say_nothing(capsys):
    # the reward's num_gpus_per_node (1) differs, but a rule reward holds no model
    _row, said = _dry(capsys, "grpo")
    assert said == []
