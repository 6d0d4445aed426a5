"""The loop steps as journalled tasks, and the one model host the loops declare.

The host holds the policy (trainer + generation engine) and the reward sources; the
round's reference for DPO is the policy itself, scored once before the round trains.
"""

from __future__ import annotations

import functools

from alignflow.flows.engine import task
from alignflow.flows.loops_config import LoopConfig
from alignflow.flows.workers import worker_group
from alignflow.tasks.loops import generate, select, train_dpo, train_sft
from alignflow.tasks.rl import export, prompts, score, sync
from alignflow.tasks.rl.host import HostSpec, ModelHost

HOST = "models"

load_prompts = task(version=1)(prompts.load_prompts)
generate_round = task(version=1)(generate.generate_round)
score_round = task(version=1)(score.score)
select_best = task(version=1)(select.select_best)
select_pairs = task(version=1)(select.select_pairs)
sft_chunk = task(version=1)(train_sft.sft_chunk)
pair_reference = task(version=1)(train_dpo.pair_reference)
dpo_chunk = task(version=1)(train_dpo.dpo_chunk)
sync_weights = task(version=1)(sync.sync)
export_model = task(version=1)(export.export_model)


def declare_host(cfg: LoopConfig) -> str:
    """One worker group holding the policy and the rewards; returns its name."""
    spec = HostSpec(roles=("actor", "reward"), models=cfg.model, actor_trainer=cfg.trainer(),
                    rewards=cfg.rewards,
                    micro_rollout_batch_size=cfg.generate.micro_rollout_batch_size,
                    num_threads=cfg.num_threads, keep_checkpoints=cfg.keep_checkpoints)
    worker_group(HOST, functools.partial(ModelHost, spec), num_cpus=cfg.num_cpus,
                 num_gpus=cfg.num_gpus)
    return HOST


def on(step, key: str):
    """`step` bound to the loop host and a task key."""
    return step.options(worker=HOST, key=key)


def round_key(round_: int) -> str:
    return f"round-{round_:04d}"


def generate_and_score(cfg: LoopConfig, prompts_out, round_: int):
    """Round `round_`'s rollouts and their scores."""
    k = round_key(round_)
    rollouts = on(generate_round, f"{k}/generate")(prompts_out, round_, cfg.generate)
    scores = on(score_round, f"{k}/score")(rollouts, round_)
    return rollouts, scores
