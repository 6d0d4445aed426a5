"""RL evaluation on a prompt set of its own (OpenRLHF's `--eval_dataset`, `eval.*`).
`eval_generate` reads the eval prompts and commits `eval_samples`; `eval_score` reads them,
commits `eval_scores` and the metrics `eval/...` of the iteration.

Every eval prompt gets `eval.n_samples_per_prompt` responses at `eval.temperature` from the
policy after the iteration's learn step. The metrics are OpenRLHF's (`compute_eval_metrics`),
per data source (a prompt row's `datasource` column, else `default`), under alignflow's
names: `eval/<source>/pass1` (mean over prompts of their mean reward),
`eval/<source>/pass<n>` (of their best reward; n > 1), `eval/<source>/response_length_mean`,
`eval/<source>/truncated_rate`, and over every source `eval/response_length_mean`,
`eval/truncated_rate`, `eval/num_samples`; when a reward source checks answers (a `correct`
score: `rule:correct`, `rule:gsm8k`, `rule:countdown`), `eval/<source>/correct` and
`eval/correct`, the share of exactly correct answers (format terms left out), kept per answer
in `eval_scores.correct` (the `eval_results` view). Neither table joins the training
rollouts. An evaluation before the first iteration (`eval.at_start`) has iteration -1.
"""

from __future__ import annotations

import pyarrow as pa

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.agents.config import AgentConfig
from alignflow.tasks.rl.async_records import PolicyRef
from alignflow.tasks.rl.episodes import run_batch
from alignflow.tasks.steps import rollout_engine
from alignflow.tasks.steps.generate import RolloutConfig, budgets, cut_to_budget, eos_ids
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.tables import EVAL_SAMPLES, EVAL_SCORES


def eval_generate(host, prompts: StepOutput, iteration: int, cfg: RolloutConfig,
                  max_len: int | None = None, policy: PolicyRef | None = None) -> StepOutput:
    """`cfg.n_samples_per_prompt` responses for every eval prompt: with the actor host's
    engine, or (`policy`: an asynchronous run's latest) on the generator worker."""
    if policy is None and not rollout_engine.drives(host):  # rank 0 generates for all
        rollout_engine.follow(host)
        return StepOutput((), 0, {})
    scope, tok = current_scope(), host.tokenizer
    table = read_table(scope.store, prompts.refs)
    ids = table.column("prompt_ids").to_pylist()
    limits = budgets(ids, cfg, max_len)
    params = cfg.sampling(scope.seed, eos_ids(tok), max(limits))
    if policy is None:
        samples = rollout_engine.generate(host, ids, params)
        host.engine_idle()
    else:
        host.use_policy(scope.store, policy)
        samples = host.engine.generate(ids, params)
    samples = sorted((cut_to_budget(s, limits[s.prompt_index]) for s in samples),
                     key=lambda s: (s.prompt_index, s.sample_index))  # n per prompt in a row
    out = _samples(scope, iteration, table, [(s.prompt_index, s.sample_index) for s in samples],
                   [s.response_ids for s in samples], [s.finish_reason for s in samples], tok)
    ref = scope.write(EVAL_SAMPLES, out, partition={"iter": iteration})
    return StepOutput((ref,), out.num_rows, {})


def agent_eval(host, prompts: StepOutput, iteration: int, cfg: RolloutConfig,
               agent: AgentConfig, policy: PolicyRef) -> StepOutput:
    """Agent runs: `cfg.n_samples_per_prompt` episodes per eval prompt, their environment
    rewards, and the `eval/*` metrics (OpenRLHF's agent samples are never truncated)."""
    scope = current_scope()
    table = read_table(scope.store, prompts.refs)
    rows, eps = run_batch(host, table, cfg, agent, policy)
    out = _samples(scope, iteration, table, rows, [e.response_ids for e in eps],
                   ["stop" if e.done else "length" for e in eps], host.tokenizer)
    scope.write(EVAL_SAMPLES, out, partition={"iter": iteration})
    rewards = [e.reward for e in eps]
    return _commit_scores(scope, out, rewards, iteration, cfg.n_samples_per_prompt,
                          [False] * len(eps))


def _samples(scope, iteration: int, table: pa.Table, rows: list[tuple[int, int]],
             responses: list[list[int]], finish: list[str], tok) -> pa.Table:
    """`eval_samples` rows: (prompt row, sample index) each, with its response."""
    col = {k: table.column(k).to_pylist() for k in ("prompt_id", "prompt", "label",
                                                   "datasource")}
    return pa.table({
        "run_id": [scope.run_id] * len(rows), "iteration": [iteration] * len(rows),
        "task_key": [scope.task_key] * len(rows),
        "prompt_id": [col["prompt_id"][p] for p, _ in rows],
        "sample_idx": [s for _, s in rows],
        "prompt": [col["prompt"][p] for p, _ in rows],
        "response": tok.batch_decode(responses, skip_special_tokens=True),
        "response_len": [len(r) for r in responses], "finish_reason": finish,
        "label": [col["label"][p] for p, _ in rows],
        "datasource": [col["datasource"][p] or "default" for p, _ in rows],
    }, schema=EVAL_SAMPLES.arrow_schema)


def eval_score(host, samples: StepOutput, iteration: int, n: int) -> StepOutput:
    """Rewards of the eval samples (the run's reward sources) and the `eval/*` metrics."""
    scope = current_scope()
    table = read_table(scope.store, samples.refs)
    prompts, responses = table.column("prompt").to_pylist(), table.column("response").to_pylist()
    labels = ["" if x is None else x for x in table.column("label").to_pylist()]
    out = host.reward.score([p + r for p, r in zip(prompts, responses, strict=True)],
                            prompts, labels)
    host.idle("reward")
    truncated = [f == "length" for f in table.column("finish_reason").to_pylist()]
    return _commit_scores(scope, table, out.rewards.tolist(), iteration, n, truncated,
                          correctness(out.scores))


def correctness(scores: dict) -> list[float] | None:
    """Each answer's exact correctness: the `correct` score of the reward sources (a
    source named `correct`, else the first `<name>/correct` component); None when no
    source checks answers. Format terms of the reward never count here."""
    keys = ["correct"] if "correct" in scores else \
        sorted(k for k in scores if k.endswith("/correct"))
    return [float(v) for v in scores[keys[0]].tolist()] if keys else None


def _commit_scores(scope, samples: pa.Table, rewards: list[float], iteration: int, n: int,
                   truncated: list[bool], correct: list[float] | None = None) -> StepOutput:
    """`eval_scores` of `samples`, and their metrics written at `iteration`."""
    ref = scope.write(EVAL_SCORES, pa.table({
        **{k: samples.column(k) for k in ("run_id", "iteration")},
        "task_key": [scope.task_key] * samples.num_rows,
        **{k: samples.column(k) for k in ("prompt_id", "sample_idx")},
        "reward": pa.array(rewards, pa.float32()),
        "correct": pa.array(correct or [None] * samples.num_rows, pa.float32())},
        schema=EVAL_SCORES.arrow_schema), partition={"iter": iteration})
    sources = samples.column("datasource").to_pylist()
    metrics = eval_metrics(sources, rewards, samples.column("response_len").to_pylist(),
                           truncated, n)
    if correct is not None:
        metrics |= correct_metrics(sources, correct)
    write_metrics(scope, [(iteration, metrics)], partition={"iter": iteration})
    return StepOutput((ref,), samples.num_rows, metrics)


def correct_metrics(sources: list[str], correct: list[float]) -> dict[str, float]:
    """`eval/<source>/correct`: the share of exactly correct answers per data source (with
    a greedy evaluation, the held-out accuracy), and `eval/correct` over all of them."""
    per: dict[str, list[float]] = {}
    for source, ok in zip(sources, correct, strict=True):
        per.setdefault(source, []).append(ok)
    out = {f"eval/{s}/correct": sum(v) / len(v) for s, v in per.items()}
    return out | {"eval/correct": sum(correct) / max(len(correct), 1)}


def eval_metrics(sources: list[str], rewards: list[float], lengths: list[int],
                 truncated: list[bool], n: int) -> dict[str, float]:
    """OpenRLHF's eval metrics; samples come as n consecutive ones per prompt."""
    per: dict[str, dict[str, list]] = {}
    for p in range(len(rewards) // n):
        chunk, at = rewards[p * n:(p + 1) * n], slice(p * n, (p + 1) * n)
        m = per.setdefault(sources[p * n], {"pass1": [], "best": [], "len": [], "cut": []})
        m["pass1"].append(sum(chunk) / n)
        m["best"].append(max(chunk))
        m["len"] += lengths[at]
        m["cut"] += truncated[at]
    out: dict[str, float] = {}
    for ds, m in per.items():
        out[f"eval/{ds}/pass1"] = sum(m["pass1"]) / len(m["pass1"])
        if n > 1:
            out[f"eval/{ds}/pass{n}"] = sum(m["best"]) / len(m["best"])
        out[f"eval/{ds}/response_length_mean"] = sum(m["len"]) / len(m["len"])
        out[f"eval/{ds}/truncated_rate"] = sum(m["cut"]) / len(m["cut"])
    out["eval/response_length_mean"] = sum(lengths) / max(len(lengths), 1)
    out["eval/truncated_rate"] = sum(truncated) / max(len(truncated), 1)
    out["eval/num_samples"] = float(len(rewards))
    return out
