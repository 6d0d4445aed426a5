"""One iteration's experience: rollouts joined with scores, reference logprobs and values,
turned into the advantages the learn step trains on. Commits: rollout_advantages."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa
import torch

from alignflow.artifacts.parquet_io import read_table
from alignflow.errors import SchemaError
from alignflow.tasks.advantages.estimators import AdvantageConfig, RolloutBatch, compute_advantages
from alignflow.tasks.advantages.multi_reward import gdpo_reward, source_rewards
from alignflow.tasks.advantages.normalize import RunningMoments
from alignflow.tasks.advantages.shaping import overlong_penalty, stop_properly
from alignflow.tasks.losses.kl import approx_kl
from alignflow.tasks.modeling.batching import to_padded
from alignflow.tasks.rewards.combine import groups_in_range
from alignflow.tasks.rewards.registry import RewardConfig, split_name
from alignflow.tasks.rl.learn_config import LearnSettings, RLRewardConfig
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.tables import ADVANTAGES

KEY = ["prompt_id", "sample_idx"]


@dataclass(frozen=True)
class Experience:
    """Per-sample tensors as the steps committed them, rows in rollout order (n consecutive
    samples per prompt)."""

    keys: pa.Table
    prompts: list[list[int]]
    responses: list[list[int]]
    old_logp: torch.Tensor   # (B, R) π_old: the behaviour log-probs until `with_pi_old`
    ref_logp: torch.Tensor | None  # (B, R); None when no KL term needs a reference
    mask: torch.Tensor       # (B, R) float: 1 on policy tokens (agent feedback tokens: 0)
    reward: torch.Tensor     # (B,)
    values: torch.Tensor | None
    versions: list[int] | None = None  # policy version of each sample's oldest token
    filter_score: torch.Tensor | None = None  # (B,) what dynamic filtering reads (else reward)
    truncated: torch.Tensor | None = None  # (B,) bool: cut at the length limit (not episodes)
    behaviour_logp: torch.Tensor | None = None  # (B, R) the engine's, once π_old replaced them
    sources: dict[str, torch.Tensor] | None = None  # (B,) each reward source's own reward


def with_pi_old(exp: Experience, pi_old: torch.Tensor | None) -> Experience:
    """The batch with the trainer's π_old as `old_logp` and the engine's log-probs kept as
    `behaviour_logp` (for the IS correction); as it is when `pi_old` is None (the engine's
    log-probs are π_old: `correction.engine_is_trainer`)."""
    if pi_old is None:
        return exp
    return dataclasses.replace(exp, old_logp=pi_old.to(exp.old_logp.device),
                               behaviour_logp=exp.old_logp)


def behaviour(exp: Experience) -> torch.Tensor:
    """The generator's log-probs μ of the batch."""
    return exp.old_logp if exp.behaviour_logp is None else exp.behaviour_logp


@dataclass(frozen=True)
class Advantages:
    """What the learn step trains on, computed once from the experience."""

    advantages: torch.Tensor  # (B, R), 0 on padding
    returns: torch.Tensor     # (B, R)
    kept: torch.Tensor        # (B,) bool, after dynamic filtering
    seq_kl: torch.Tensor | None  # (B,) mean per-token KL to the reference (if one ran)
    metrics: dict[str, float]


def _column(store, out: StepOutput, columns: list[str], keys: pa.Table, what: str) -> pa.Table:
    table = read_table(store, out.refs, columns=[*KEY, *columns])
    if not table.select(KEY).equals(keys):
        raise SchemaError(f"{what} rows of {[r.path for r in out.refs]} do not match the "
                          f"rollouts' (prompt_id, sample_idx) order")
    return table


def load_experience(store, rollouts: StepOutput, scores: StepOutput,
                    reference: StepOutput | None, values: StepOutput | None) -> Experience:
    roll = read_table(store, rollouts.refs,
                      columns=["run_id", "iteration", *KEY, "prompt_ids", "response_ids",
                               "behaviour_logprobs", "action_mask", "policy_version",
                               "finish_reason"])
    keys = roll.select(KEY)
    responses = roll.column("response_ids").to_pylist()
    width = max(len(r) for r in responses)
    mask = to_padded(action_masks(responses, roll.column("action_mask").to_pylist()), width)
    scored = _column(store, scores, ["reward", "filter_score", "scores"], keys, "scores")
    reward = scored.column("reward")
    filtered = [r if f is None else f for r, f in zip(
        reward.to_pylist(), scored.column("filter_score").to_pylist(), strict=True)]
    ref = None
    if reference is not None:
        col = "teacher_logprobs" if reference.refs[0].table == "rollout_teacher" else \
            "ref_logprobs"  # on-policy distillation: the teacher's stand in (distill_online)
        ref = to_padded(_column(store, reference, [col], keys, "reference")
                        .column(col).to_pylist(), width)
    vals = None
    if values is not None:
        vals = to_padded(_column(store, values, ["values"], keys, "values")
                         .column("values").to_pylist(), width)
    return Experience(
        keys=roll.select(["run_id", "iteration", *KEY]),
        prompts=roll.column("prompt_ids").to_pylist(), responses=responses,
        old_logp=to_padded(roll.column("behaviour_logprobs").to_pylist(), width),
        ref_logp=ref, mask=mask,
        reward=torch.tensor(reward.to_pylist(), dtype=torch.float32), values=vals,
        versions=roll.column("policy_version").to_pylist(),
        filter_score=torch.tensor(filtered, dtype=torch.float32),
        truncated=_truncated(roll),
        sources=source_rewards(scored.column("scores").to_pylist()))


def _truncated(roll: pa.Table) -> torch.Tensor:
    """Responses cut at the length limit (OpenRLHF: finish_reason "length"); a multi-turn
    episode (it has an action mask) is never, as OpenRLHF's agent executor marks none."""
    return torch.tensor([f == "length" and m is None for f, m in zip(
        roll.column("finish_reason").to_pylist(), roll.column("action_mask").to_pylist(),
        strict=True)], dtype=torch.bool)


def first_groups(exp: Experience, n: int, keep: int, low: float, high: float
                 ) -> tuple[Experience, dict[str, float]]:
    """A refilled batch (`flows/rl/refill.py`): the first `keep` groups of `n` samples whose
    filter score passes (low, high), in the order drawn; and the pass rate over all drawn
    groups (OpenRLHF's `dynamic_filtering_pass_rate`, in %). When the prompts ran out first,
    the first failing groups fill the batch up to `keep` (filtered out by `compute`, as
    without refills), so a step always has rollout.batch_size groups."""
    passing = groups_in_range(_filter_scores(exp), n, low, high)
    chosen = passing.nonzero().flatten()[:keep].tolist()
    short = keep - len(chosen)
    if short > 0:
        chosen = sorted(chosen + (~passing).nonzero().flatten()[:short].tolist())
    rows = [g * n + j for g in chosen for j in range(n)]
    rate = 100.0 * int(passing.sum()) / len(passing) if len(passing) else 0.0
    return _rows(exp, rows), {"rollout/dynamic_filtering_pass_rate": rate,
                              "rollout/refill_groups_drawn": float(len(passing))}


def _rows(exp: Experience, rows: list[int]) -> Experience:
    """The experience of `rows` only, in that order."""
    index = torch.tensor(rows, dtype=torch.long)

    def take(t):
        return None if t is None else t[index.to(t.device)]
    return dataclasses.replace(
        exp, keys=exp.keys.take(pa.array(rows, pa.int64())),
        prompts=[exp.prompts[i] for i in rows], responses=[exp.responses[i] for i in rows],
        old_logp=take(exp.old_logp), ref_logp=take(exp.ref_logp), mask=take(exp.mask),
        reward=take(exp.reward), values=take(exp.values),
        versions=None if exp.versions is None else [exp.versions[i] for i in rows],
        filter_score=take(exp.filter_score), truncated=take(exp.truncated),
        behaviour_logp=take(exp.behaviour_logp),
        sources=None if exp.sources is None else {k: take(v) for k, v in exp.sources.items()})


def lengths(exp: Experience) -> list[int]:
    """Prompt + response tokens of each sample (what a token budget counts)."""
    return [len(p) + len(r) for p, r in zip(exp.prompts, exp.responses, strict=True)]


def action_masks(responses: list[list[int]], masks: list[list[int] | None]) -> list[list[float]]:
    """Each row's loss mask: its `action_mask` (multi-turn episodes), else every token."""
    return [[1.0] * len(r) if m is None else [float(x) for x in m]
            for r, m in zip(responses, masks, strict=True)]


def to_device(exp: Experience, adv: Advantages, device: torch.device
              ) -> tuple[Experience, Advantages]:
    """The batch's tensors where the trainer computes (no copy on the CPU)."""
    def move(t):
        return None if t is None else t.to(device)
    exp = dataclasses.replace(exp, old_logp=move(exp.old_logp), ref_logp=move(exp.ref_logp),
                              mask=move(exp.mask), reward=move(exp.reward),
                              values=move(exp.values), behaviour_logp=move(exp.behaviour_logp))
    adv = dataclasses.replace(adv, advantages=move(adv.advantages), returns=move(adv.returns),
                              kept=move(adv.kept), seq_kl=move(adv.seq_kl))
    return exp, adv


def compute(exp: Experience, settings: LearnSettings, kl_coef: float,
            moments: RunningMoments | None) -> Advantages:
    """Advantages and returns (KL in the reward with β = `kl_coef`), the kept mask."""
    algo, shaping, n = settings.algo, settings.reward, settings.n_samples
    kl = None if exp.ref_logp is None else \
        approx_kl(exp.old_logp, exp.ref_logp, algo.kl.estimator) * exp.mask
    est = algo.advantage
    reward = exp.reward if est.multi_reward_norm == "sum" else \
        gdpo_reward(exp.sources or {}, n, source_weights(shaping)).to(exp.reward.device)
    if moments is not None:
        moments.update(reward)
        reward = moments.normalize(reward)
    reward = _shaped(reward, exp, shaping, settings.max_len)
    # GDPO (`multi_reward.py`): the sum is already normalised per group, so only centre it
    cfg = AdvantageConfig(estimator=est.estimator if est.multi_reward_norm == "sum" else
                          "dr_grpo", n=n, gamma=est.gamma, lambd=est.lambd,
                          kl_coef=kl_coef, reward_clip=shaping.clip_range,
                          whiten_std=not est.no_std_norm)  # OpenRLHF: group_norm keeps its std
    out = compute_advantages(RolloutBatch(reward, exp.mask, kl, exp.values), cfg)
    kept = (groups_in_range(_filter_scores(exp), n, *algo.dynamic_filtering_range)
            .repeat_interleave(n)
            if algo.dynamic_filtering_enable else torch.ones(len(reward), dtype=torch.bool))
    seq_kl = None if kl is None else kl.sum(-1) / exp.mask.sum(-1).clamp(min=1)
    metrics = {**({} if seq_kl is None else {"kl": float(seq_kl.mean())}), "kl_coef": kl_coef,
               "advantage_abs_mean": float((out.advantages.abs() * exp.mask).sum()
                                           / exp.mask.sum()),
               "kept_frac": float(kept.float().mean())}
    return Advantages(out.advantages, out.returns, kept, seq_kl, metrics)


def _filter_scores(exp: Experience) -> torch.Tensor:
    """OpenRLHF's `scores` where the sources gave them, else the raw reward (never the
    shaped one: length penalties and clipping are not what a group is filtered on)."""
    return exp.reward if exp.filter_score is None else exp.filter_score.to(exp.reward.device)


def _shaped(reward: torch.Tensor, exp: Experience, shaping: RLRewardConfig,
            max_len: int) -> torch.Tensor:
    """The reward with OpenRLHF's length penalties, in its order: DAPO's overlong term
    added, then the stop-properly penalty on truncated responses (clipping comes later)."""
    if shaping.overlong_buffer_len is not None:
        penalty = overlong_penalty(max_len, shaping.overlong_buffer_len,
                                   shaping.overlong_penalty_factor)
        reward = reward.float() + penalty(exp.mask.bool().sum(-1))
    coef = shaping.stop_properly_penalty_coef
    if coef is not None and exp.truncated is not None:
        reward = stop_properly(reward.float(), exp.truncated.to(reward.device), coef)
    return reward


def advantages_table(exp: Experience, adv: Advantages, task_key: str) -> pa.Table:
    lengths = [len(r) for r in exp.responses]  # every response token (agent feedback too)
    f32 = pa.list_(pa.float32())
    return pa.table({
        "run_id": exp.keys.column("run_id"), "iteration": exp.keys.column("iteration"),
        "task_key": [task_key] * len(lengths),
        "prompt_id": exp.keys.column("prompt_id"), "sample_idx": exp.keys.column("sample_idx"),
        "advantages": pa.array([adv.advantages[i, :n].tolist() for i, n in enumerate(lengths)],
                               f32),
        "returns": pa.array([adv.returns[i, :n].tolist() for i, n in enumerate(lengths)], f32),
        "kl": pa.nulls(len(lengths), pa.float32()) if adv.seq_kl is None
        else pa.array(adv.seq_kl.tolist(), pa.float32()),
        "kept": pa.array(adv.kept.tolist(), pa.bool_()),
    }, schema=ADVANTAGES.arrow_schema)


def source_weights(cfg: RewardConfig) -> dict[str, float]:
    """Each source's weight by the name its reward is stored under (`build_reward`'s)."""
    return dict(zip([split_name(s)[0] for s in cfg.specs], cfg.weights or (), strict=False))
