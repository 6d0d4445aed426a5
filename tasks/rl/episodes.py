"""Multi-turn agent episodes on the generator worker. Reads: prompts. Commits: rollouts (one
row per episode: its first observation as the prompt, every later token as the response,
`action_mask` marking the policy's tokens), rollout_turns (one row per turn, with the
environment's feedback and reward) and rollout_scores (the episode's summed reward)."""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts.schemas import ROLLOUTS
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.agents.config import AgentConfig
from alignflow.tasks.agents.engine import BatchingEngine
from alignflow.tasks.agents.runner import Episode, run_episodes
from alignflow.tasks.agents.sampling import AgentSamplingParams
from alignflow.tasks.rl.async_generate import batch_metrics
from alignflow.tasks.rl.async_records import EpisodeOutput, PolicyRef
from alignflow.tasks.steps.generate import RolloutConfig, eos_ids
from alignflow.tasks.steps.host_api import Sampler
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.steps.prompts import prompt_batch
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.tables import SCORES, TURNS


def _keys(scope, iteration: int, pids: list[str], samples: list[int]) -> dict:
    n = len(pids)
    return {"run_id": [scope.run_id] * n, "iteration": [iteration] * n,
            "task_key": [scope.task_key] * n, "prompt_id": pids, "sample_idx": samples}


def _rollouts(scope, iteration, batch: pa.Table, rows: list[tuple[int, int]],
              eps: list[Episode], tok, version: int) -> pa.Table:
    texts, labels = batch.column("prompt").to_pylist(), batch.column("label").to_pylist()
    pids = batch.column("prompt_id").to_pylist()
    return pa.table({
        **_keys(scope, iteration, [pids[p] for p, _ in rows], [s for _, s in rows]),
        "prompt": [texts[p] for p, _ in rows],
        "response": tok.batch_decode([e.response_ids for e in eps], skip_special_tokens=True),
        "prompt_ids": [e.prompt_ids for e in eps], "response_ids": [e.response_ids for e in eps],
        "behaviour_logprobs": [e.logprobs for e in eps],
        "prompt_len": [len(e.prompt_ids) for e in eps],
        "response_len": [len(e.response_ids) for e in eps],
        "finish_reason": ["stop" if e.done else "length" for e in eps],
        "policy_version": [version] * len(eps), "label": [labels[p] for p, _ in rows],
        "action_mask": [e.action_mask for e in eps], "turns": [len(e.turns) for e in eps],
    })


def _turns(keys: dict, eps: list[Episode]) -> pa.Table:
    rows = [(i, t, turn) for i, e in enumerate(eps) for t, turn in enumerate(e.turns)]
    return pa.table({
        **{k: [keys[k][i] for i, _, _ in rows] for k in keys},
        "turn": [t for _, t, _ in rows],
        **{c: [turn.get(c) for _, _, turn in rows] for c in (
            "action", "feedback", "reward", "done", "action_tokens", "feedback_tokens")},
    }, schema=TURNS.arrow_schema)


def _scores(keys: dict, eps: list[Episode]) -> pa.Table:
    names = sorted({k for e in eps for k in e.extra_logs})
    return pa.table({**keys, "reward": pa.array([e.reward for e in eps], pa.float32()),
                     "scores": pa.array([[("agent", e.reward)] + [(k, e.extra_logs[k])
                                                                 for k in names if k in e.extra_logs]
                                         for e in eps], pa.map_(pa.string(), pa.float32())),
                     "filter_score": pa.array([e.reward if e.score is None else e.score
                                               for e in eps], pa.float32())},
                    schema=SCORES.arrow_schema)


def agent_episodes(host: Sampler, prompts: StepOutput, iteration: int, cfg: RolloutConfig,
                   agent: AgentConfig, policy: PolicyRef, sample_offset: int = 0,
                   replaces_staleness: int | None = None) -> EpisodeOutput:
    """`n_samples_per_prompt` episodes per batch prompt, sampled with `policy`."""
    scope = current_scope()
    batch = prompt_batch(scope.store, prompts, iteration, cfg.batch_size)
    rows, eps = run_batch(host, batch, cfg, agent, policy, sample_offset)
    return _commit(scope, iteration, batch, rows, eps, host.tokenizer, policy.version,
                   replaces_staleness)


def run_batch(host: Sampler, batch: pa.Table, cfg: RolloutConfig, agent: AgentConfig,
              policy: PolicyRef, sample_offset: int = 0
              ) -> tuple[list[tuple[int, int]], list[Episode]]:
    """(prompt row, sample index) and the episode of each of `batch`'s prompts' samples."""
    scope = current_scope()
    host.use_policy(scope.store, policy)
    rows = [(p, s + sample_offset) for p in range(batch.num_rows)
            for s in range(cfg.n_samples_per_prompt)]
    executor, tok = host.agent, host.tokenizer
    for name in ("max_turns", "step_timeout"):
        if hasattr(executor, name):
            setattr(executor, name, getattr(agent, name))
    engine = BatchingEngine(host.engine, tok, seed=scope.seed, eos_token_ids=eos_ids(tok),
                            episodes=len(rows))
    params = AgentSamplingParams(max_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                                 top_p=cfg.top_p, top_k=cfg.top_k, stop=list(cfg.stop))
    texts, labels = batch.column("prompt").to_pylist(), batch.column("label").to_pylist()
    return rows, run_episodes(executor, [(texts[p], labels[p]) for p, _ in rows], engine, tok,
                              params, agent.max_length)


def _commit(scope, iteration, batch, rows, eps, tok, version, replaces_staleness):
    table = _rollouts(scope, iteration, batch, rows, eps, tok, version)
    keys = {k: table.column(k).to_pylist() for k in ("run_id", "iteration", "task_key",
                                                     "prompt_id", "sample_idx")}
    refs = [scope.write(ROLLOUTS, table, partition={"iter": iteration}),
            scope.write(SCORES, _scores(keys, eps), partition={"iter": iteration}),
            scope.write(TURNS, _turns(keys, eps), partition={"iter": iteration})]
    rewards = [e.reward for e in eps]
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / max(len(rewards) - 1, 1)) ** 0.5
    turns = sum(len(e.turns) for e in eps) / len(eps)
    if replaces_staleness is not None:
        write_metrics(scope, [(iteration, {"regenerated_batches": 1.0,
                                           "stale_batch_staleness": replaces_staleness})],
                      partition={"iter": iteration})
    return EpisodeOutput(
        StepOutput((refs[0],), table.num_rows, batch_metrics(table) | {"turns_mean": turns}),
        StepOutput((refs[1],), table.num_rows, {"reward_mean": mean, "reward_std": std}),
        StepOutput((refs[2],), sum(len(e.turns) for e in eps)))
