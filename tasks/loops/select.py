"""Which samples a round keeps. Reads: rollouts, rollout_scores. Commits:
rollout_selection (and, for pairs, preferences), all with the round.

Best-of-n keeps each prompt's highest-reward sample (ties: the lowest sample index) if it
reaches the threshold. Best-vs-worst pairs each prompt's best sample against its worst
(ties as above, the worst taking the highest index) when the gap is > 0 and >= the margin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.schemas import PREFERENCES
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.loops.records import Selection
from alignflow.tasks.loops.tables import SELECTION
from alignflow.tasks.steps.records import StepOutput

Groups = dict[str, list[tuple[int, float]]]


@dataclass(frozen=True)
class Pair:
    prompt_id: str
    chosen: int
    rejected: int
    chosen_reward: float
    rejected_reward: float


def group_rewards(prompt_ids: Sequence[str], sample_idx: Sequence[int],
                  rewards: Sequence[float]) -> Groups:
    """prompt_id -> [(sample_idx, reward)], prompts in order of first appearance."""
    groups: Groups = {}
    for p, s, r in zip(prompt_ids, sample_idx, rewards, strict=True):
        groups.setdefault(p, []).append((int(s), float(r)))
    return groups


def best_of_n(groups: Groups, threshold: float | None = None) -> list[tuple[str, int, float]]:
    """(prompt_id, sample_idx, reward) of each prompt's best sample reaching `threshold`."""
    kept = []
    for pid, samples in groups.items():
        idx, reward = min(samples, key=lambda s: (-s[1], s[0]))
        if threshold is None or reward >= threshold:
            kept.append((pid, idx, reward))
    return kept


def best_vs_worst(groups: Groups, margin: float = 0.0) -> list[Pair]:
    """Each prompt's best against its worst sample, if they differ by > 0 and >= margin."""
    pairs = []
    for pid, samples in groups.items():
        best = min(samples, key=lambda s: (-s[1], s[0]))
        worst = min(samples, key=lambda s: (s[1], -s[0]))
        gap = best[1] - worst[1]
        if gap > 0 and gap >= margin:
            pairs.append(Pair(pid, best[0], worst[0], best[1], worst[1]))
    return pairs


def _scored(store, rollouts: StepOutput, scores: StepOutput) -> tuple[pa.Table, Groups]:
    roll = read_table(store, rollouts.refs, columns=["prompt_id", "sample_idx", "prompt",
                                                     "response", "iteration"])
    sc = read_table(store, scores.refs, columns=["prompt_id", "sample_idx", "reward"])
    reward = {(p, s): r for p, s, r in zip(*(sc.column(c).to_pylist() for c in sc.column_names),
                                           strict=True)}
    pids, sidx = roll.column("prompt_id").to_pylist(), roll.column("sample_idx").to_pylist()
    groups = group_rewards(pids, sidx, [reward[k] for k in zip(pids, sidx, strict=True)])
    return roll, groups


def _selection_table(scope, round_: int, rows: list[tuple[str, int, str, str | None, float]]):
    """rows: (prompt_id, sample_idx, role, pair_id, reward)."""
    cols = list(zip(*rows, strict=True)) if rows else [[]] * 5
    n = len(rows)
    return pa.table({
        "run_id": [scope.run_id] * n, "iteration": pa.array([round_] * n, pa.int32()),
        "task_key": [scope.task_key] * n, "prompt_id": pa.array(cols[0], pa.string()),
        "sample_idx": pa.array(cols[1], pa.int32()), "round": pa.array([round_] * n, pa.int32()),
        "role": pa.array(cols[2], pa.string()), "pair_id": pa.array(cols[3], pa.string()),
        "reward": pa.array(cols[4], pa.float32())})


def select_best(rollouts: StepOutput, scores: StepOutput, round_: int,
                threshold: float | None = None) -> Selection:
    """Best-of-n: one `best` row per kept prompt."""
    scope = current_scope()
    _, groups = _scored(scope.store, rollouts, scores)
    kept = best_of_n(groups, threshold)
    rows = [(pid, idx, "best", None, r) for pid, idx, r in kept]
    ref = scope.write(SELECTION, _selection_table(scope, round_, rows), partition={"iter": round_})
    mean = sum(r for *_, r in kept) / len(kept) if kept else 0.0
    return Selection((ref,), len(kept), scope.seed, metrics={
        "selected": float(len(kept)), "prompts": float(len(groups)), "selected_reward_mean": mean})


def select_pairs(rollouts: StepOutput, scores: StepOutput, round_: int,
                 margin: float = 0.0) -> Selection:
    """Best-vs-worst pairs: `chosen` and `rejected` rows, and one `preferences` row per pair."""
    scope = current_scope()
    roll, groups = _scored(scope.store, rollouts, scores)
    pairs = best_vs_worst(groups, margin)
    text = {(p, s): (q, r) for p, s, q, r in zip(
        *(roll.column(c).to_pylist() for c in ("prompt_id", "sample_idx", "prompt", "response")),
        strict=True)}
    rows, prefs = [], []
    for p in pairs:
        pair_id = f"round-{round_:04d}/{p.prompt_id}"
        rows += [(p.prompt_id, p.chosen, "chosen", pair_id, p.chosen_reward),
                 (p.prompt_id, p.rejected, "rejected", pair_id, p.rejected_reward)]
        prompt, chosen = text[(p.prompt_id, p.chosen)]
        prefs.append({"run_id": scope.run_id, "round": round_, "task_key": scope.task_key,
                      "pair_id": pair_id, "prompt": prompt, "chosen": chosen,
                      "rejected": text[(p.prompt_id, p.rejected)][1],
                      "chosen_score": p.chosen_reward, "rejected_score": p.rejected_reward,
                      "margin": p.chosen_reward - p.rejected_reward, "split": "train"})
    sel = scope.write(SELECTION, _selection_table(scope, round_, rows), partition={"iter": round_})
    pref = scope.write(PREFERENCES, pa.Table.from_pylist(prefs) if prefs else
                       PREFERENCES.arrow_schema.empty_table(), partition={"iter": round_})
    gaps = [p.chosen_reward - p.rejected_reward for p in pairs]
    return Selection((sel,), len(pairs), scope.seed, (pref,), metrics={
        "pairs": float(len(pairs)), "prompts": float(len(groups)),
        "margin_mean": sum(gaps) / len(gaps) if gaps else 0.0})
