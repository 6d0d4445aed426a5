"""OpenRLHF's launcher arithmetic, written down as data: for each flag set, the GPUs each
role gets, which roles share GPUs, and the vLLM engines (how many, where each sits), as
OpenRLHF 0.11 places them. Read from its source (github OpenRLHF/OpenRLHF at 3c3be623:
`openrlhf/cli/train_ppo_ray.py:train`, `trainer/ray/launcher.py:RayActorGroup`,
`trainer/ray/vllm_engine.py:create_vllm_engines`, `trainer/ray/utils.py:get_bundle_indices`);
the layouts below were worked out by hand from these rules, not computed by alignflow.

1. actor: actor.num_nodes × actor.num_gpus_per_node ranks, one GPU each.
2. ref, only when algo.kl.init_coef > 0: with train.colocate_actor_ref or train.colocate_all,
   on the actor's placement group (rank r on bundle r, 0.2 GPU each; equal sizes asserted):
   the actor's GPUs; else ref.num_nodes × ref.num_gpus_per_node GPUs of its own.
3. critic, only for algo.advantage.estimator gae: with train.colocate_critic_reward, a new
   placement group of critic.num_nodes × critic.num_gpus_per_node bundles shared with the
   reward model — this wins over train.colocate_all (the launcher resets `pg` after the ref
   and makes the critic's group when the pair flag is set); else with train.colocate_all on
   the actor's placement group; else GPUs of its own.
4. reward, only without reward.remote_url: in the critic's group when the critic/reward pair
   group exists, else on the actor's placement group with train.colocate_all, else
   reward.num_nodes × reward.num_gpus_per_node GPUs of its own.
5. vLLM, when vllm.num_engines > 0: with train.colocate_all (synchronous), the engines go
   into the actor's placement group (engines × TP = actor ranks asserted) at 0.2 GPU: engine
   i on bundles [i·TP, (i+1)·TP) of the group's bundles sorted by node (PACK fills node 0
   first: bundle b on node b // GPUs per node); else a PACK placement group of
   engines × TP GPUs of their own.

A layout: `gpus` (role → GPUs it runs on; a remote reward: 0), `shared` (sets of roles on
the same GPUs, "vllm" for engines inside them), `engines` (per engine: ("own", TP) or
("actor", bundle indices, node)).
"""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.plan.sites import engine_sites

RM = "tests/fixtures"  # any path that is not a rule, URL or .py file: a reward model
REMOTE = "http://rm.example:5000/get_reward"
KL = "algo.kl.init_coef=0.01"


def _per(role: str, nodes: int, gpus: int) -> list[str]:
    return [f"{role}.num_nodes={nodes}", f"{role}.num_gpus_per_node={gpus}"]


def _engines(count: int, tp: int) -> list[str]:
    return ["rollout.engine=vllm", f"vllm.num_engines={count}",
            f"vllm.tensor_parallel_size={tp}"]


def _own(count: int, tp: int) -> tuple:
    return (("own", tp),) * count


def _hybrid(count: int, tp: int, per_node: int = 8) -> tuple:
    return tuple(("actor", tuple(range(i * tp, (i + 1) * tp)), i * tp // per_node)
                 for i in range(count))


@dataclass(frozen=True)
class Case:
    name: str
    cluster: str
    flow: str
    sets: tuple[str, ...]
    gpus: dict
    shared: frozenset
    engines: tuple


def _case(name, cluster, flow, sets, gpus, shared=(), engines=()) -> Case:
    return Case(name, cluster, flow, tuple(sets), gpus,
                frozenset(frozenset(s) for s in shared), engines)


PPO_RM = ["reward.model_name_or_path=" + RM, KL]
ALL = "train.colocate_all=true"
AR, CR = "train.colocate_actor_ref=true", "train.colocate_critic_reward=true"
ROLES8 = [*_per("actor", 1, 8), *_per("ref", 1, 8), *_per("critic", 1, 8),
          *_per("reward", 1, 8)]

CASES = (
    _case("ppo_apart_1x8", "1x8", "ppo",
          [*PPO_RM, *_per("actor", 1, 2), *_per("critic", 1, 2), *_per("ref", 1, 1),
           *_per("reward", 1, 1), *_engines(2, 1)],
          {"actor": 2, "critic": 2, "ref": 1, "reward": 1}, (), _own(2, 1)),
    _case("actor_ref_1x8", "1x8", "ppo",
          [*PPO_RM, AR, *_per("actor", 1, 2), *_per("ref", 1, 2), *_per("critic", 1, 2),
           *_per("reward", 1, 1), *_engines(1, 2)],
          {"actor": 2, "ref": 2, "critic": 2, "reward": 1}, [{"actor", "ref"}], _own(1, 2)),
    _case("critic_reward_1x8", "1x8", "ppo",
          [*PPO_RM, CR, *_per("actor", 1, 2), *_per("ref", 1, 1), *_per("critic", 1, 2),
           *_per("reward", 1, 2), *_engines(2, 1)],
          {"actor": 2, "ref": 1, "critic": 2, "reward": 2}, [{"critic", "reward"}],
          _own(2, 1)),
    _case("both_pairs_1x8", "1x8", "ppo",
          [*PPO_RM, AR, CR, *_per("actor", 1, 2), *_per("ref", 1, 2), *_per("critic", 1, 2),
           *_per("reward", 1, 2), *_engines(2, 1)],
          {"actor": 2, "ref": 2, "critic": 2, "reward": 2},
          [{"actor", "ref"}, {"critic", "reward"}], _own(2, 1)),
    # examples/scripts/train_ppo_ray_slurm.sh: both pairs, 4 engines × TP 2 of their own
    _case("ppo_slurm_2x8", "2x8", "ppo",
          [*PPO_RM, AR, CR, *_per("actor", 1, 4), *_per("ref", 1, 4), *_per("critic", 1, 4),
           *_per("reward", 1, 4), *_engines(4, 2)],
          {"actor": 4, "ref": 4, "critic": 4, "reward": 4},
          [{"actor", "ref"}, {"critic", "reward"}], _own(4, 2)),
    # examples/scripts/train_ppo_ray_hybrid_engine.sh: everything on 8 GPUs, 4 × TP 2
    _case("ppo_hybrid_4xtp2_1x8", "1x8", "ppo", [*PPO_RM, ALL, *ROLES8, *_engines(4, 2)],
          {"actor": 8, "ref": 8, "critic": 8, "reward": 8},
          [{"actor", "ref", "critic", "reward", "vllm"}], _hybrid(4, 2)),
    # the same script without --train.colocate_all: every role and the engines apart
    _case("ppo_script_apart_5x8", "5x8", "ppo", [*PPO_RM, *ROLES8, *_engines(4, 2)],
          {"actor": 8, "ref": 8, "critic": 8, "reward": 8}, (), _own(4, 2)),
    # examples/scripts/train_prorlv2_math_hybrid_engine.sh: 8 engines × TP 1, remote reward
    _case("grpo_hybrid_8xtp1_remote_1x8", "1x8", "grpo",
          [f"reward.remote_url={REMOTE}", KL, ALL, *_per("actor", 1, 8), *_per("ref", 1, 8),
           *_engines(8, 1)],
          {"actor": 8, "ref": 8, "reward": 0}, [{"actor", "ref", "vllm"}], _hybrid(8, 1)),
    # train_dapo_ray_hybrid_engine.sh on two nodes: 16 actor GPUs, 8 engines × TP 2
    _case("grpo_hybrid_8xtp2_2x8", "2x8", "grpo",
          [f"reward.remote_url={REMOTE}", KL, ALL, *_per("actor", 2, 8), *_per("ref", 2, 8),
           *_engines(8, 2)],
          {"actor": 16, "ref": 16, "reward": 0}, [{"actor", "ref", "vllm"}], _hybrid(8, 2)),
    _case("grpo_remote_apart_2x8", "2x8", "grpo",
          [f"reward.remote_url={REMOTE}", KL, *_per("actor", 2, 4), *_per("ref", 1, 2),
           *_engines(3, 2)],
          {"actor": 8, "ref": 2, "reward": 0}, (), _own(3, 2)),
    _case("all_and_critic_reward_1x8", "1x8", "ppo",
          [*PPO_RM, ALL, CR, *_per("actor", 1, 4), *_per("ref", 1, 4), *_per("critic", 1, 4),
           *_per("reward", 1, 4), *_engines(4, 1)],
          {"actor": 4, "ref": 4, "critic": 4, "reward": 4},
          [{"actor", "ref", "vllm"}, {"critic", "reward"}], _hybrid(4, 1)),
    _case("all_three_flags_1x8", "1x8", "ppo",
          [*PPO_RM, ALL, AR, CR, *_per("actor", 1, 4), *_per("ref", 1, 4),
           *_per("critic", 1, 4), *_per("reward", 1, 4), *_engines(4, 1)],
          {"actor": 4, "ref": 4, "critic": 4, "reward": 4},
          [{"actor", "ref", "vllm"}, {"critic", "reward"}], _hybrid(4, 1)),
    _case("all_and_actor_ref_grpo_1x8", "1x8", "grpo",
          [f"reward.model_name_or_path={RM}", KL, ALL, AR, *_per("actor", 1, 4),
           *_per("ref", 1, 4), *_per("reward", 1, 4), *_engines(2, 2)],
          {"actor": 4, "ref": 4, "reward": 4}, [{"actor", "ref", "reward", "vllm"}],
          _hybrid(2, 2)),
    # the hybrid DP-2 layout of tests/sim: one engine per actor GPU, a rule reward
    _case("grpo_hybrid_dp2_1x8", "1x8", "grpo",
          ["reward.sources=rule:target:e", KL, ALL, *_per("actor", 1, 2), *_per("ref", 1, 2),
           *_engines(2, 1)],
          {"actor": 2, "ref": 2, "reward": 0}, [{"actor", "ref", "vllm"}], _hybrid(2, 1)),
    _case("ppo_remote_critic_from_actor_1x8", "1x8", "ppo",
          [f"reward.remote_url={REMOTE}", KL, *_per("actor", 1, 2), *_per("critic", 1, 2),
           *_per("ref", 1, 1), *_engines(2, 1)],
          {"actor": 2, "critic": 2, "ref": 1, "reward": 0}, (), _own(2, 1)),
)


def case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def layout(plan: RunPlan, reward_model: bool) -> tuple[dict, frozenset, tuple]:
    """alignflow's plan in the shape of a `Case`: GPUs per role, roles (and "vllm") that
    share GPUs, and each engine's site (`tasks/plan/sites.py`)."""
    def modelled(role: str) -> bool:
        return role != "reward" or reward_model
    gpus = {r: plan.host(plan.host_of(r)).gpus if modelled(r) else 0 for r in plan.roles}
    sites = engine_sites(plan)
    shared = set()
    for host in plan.hosts:
        members = {r for r in host.roles if modelled(r)}
        members |= {"vllm"} if any(s.host == host.name for s in sites) else set()
        if host.gpus and len(members) > 1:
            shared.add(frozenset(members))
    where = tuple(("own", int(s.gpus)) if s.host is None else
                  ("actor", s.ranks, s.node) for s in sites)
    return gpus, frozenset(shared), where
