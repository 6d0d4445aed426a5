"""SFT → GRPO → held-out evaluation on a generated task: the pipeline to copy.

    python examples/learn_arith.py --store ./alignflow-store   # the tiny model, ~1 min

1. SFT teaches the task partly: `alignflow:arith-D`'s training split, question → answer.
2. GRPO starts from the SFT model with the exact answer as the only reward
   (`rule:correct`: no format term), and evaluates greedily on the held-out split before
   the first iteration and every `eval.steps` iterations (`eval_results`).
3. The held-out correctness at the start and at the end comes back from SQL.

Each stage is its own durable run (`sft-<seed>`, `grpo-<seed>`): a crash resumes the stage
it was in (`alignflow resume RUN`), and rerunning this script with the same store and seed
replays the finished ones from their records. The sizes suit a CPU; `tests/learning`
runs this with the tiny test model, beside a control that must not learn (the same runs
with the advantage estimator returning zeros).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import alignflow
from alignflow.catalog.catalog import Catalog
from alignflow.errors import FlowError
from alignflow.flows.config import load_config
from alignflow.flows.offline.config import SFTConfig
from alignflow.flows.offline.sft import sft
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.grpo import grpo

CURVE = ("SELECT iteration, avg(correct) AS correct, count(*) AS n FROM eval_results "
         "WHERE run_id = ? GROUP BY iteration ORDER BY iteration")


def sft_sets(model: str, task: str, steps: int) -> list[str]:
    """SFT on the task's training split, in the model's chat template."""
    return [f"model.model_name_or_path={model}", f"data.dataset={task}",
            "data.output_key=output", "data.input_template=null",
            "data.apply_chat_template=true", "train.batch_size=32",
            "train.micro_batch_size=32", f"train.max_steps={steps}", "train.max_epochs=50",
            "adam.lr=3e-3", "lr_warmup_ratio=0", f"ckpt.save_steps={steps}", "num_threads=1"]


def grpo_sets(policy: str, task: str, iterations: int) -> list[str]:
    """GRPO on the training split; greedy evaluation on the held-out split."""
    return [f"actor.model_name_or_path={policy}", f"data.prompt_dataset={task}",
            "data.apply_chat_template=true", "data.max_samples=512",
            "rollout.batch_size=16", "rollout.n_samples_per_prompt=8",
            "rollout.max_new_tokens=4", "rollout.micro_batch_size=64",
            "reward.sources=rule:correct", "train.batch_size=64",
            "train.micro_batch_size=64", "actor.adam.lr=1e-3", "actor.lr_warmup_ratio=0",
            "algo.advantage.estimator=group_norm", "algo.kl.init_coef=0",
            f"train.max_iterations={iterations}", "train.num_episodes=100",
            f"eval.dataset={task}", "eval.split=test", f"eval.steps={iterations}",
            "eval.at_start=true", "eval.temperature=0", "eval.n_samples_per_prompt=1"]


def stage(flow, cfg, store: str, seed: int, run_id: str, executor: str) -> dict:
    """Run one stage durably; a run of that id already in the store is resumed (a finished
    one gives its output without running anything)."""
    try:
        alignflow.get_status(run_id, store=store)
    except FlowError:
        return alignflow.run(flow, cfg, store=store, seed=seed, run_id=run_id,
                             executor=executor)
    return alignflow.resume(run_id, store=store, flow=flow, config=cfg, executor=executor,
                            finished_output=True)


def learn(model: str, store: str, *, task: str = "alignflow:arith-2", seed: int = 0,
          sft_steps: int = 150, iterations: int = 30, executor: str = "auto",
          extra: tuple[str, ...] = (), name: str = "grpo") -> dict:
    """Run both stages; returns the held-out correctness curve of the GRPO run."""
    first = stage(sft, load_config(SFTConfig, sets=sft_sets(model, task, sft_steps)), store,
                  seed, f"sft-{seed}", executor)
    policy = str(Path(store) / first["model"])
    cfg = load_config(RLConfig, sets=[*grpo_sets(policy, task, iterations), *extra])
    run_id = f"{name}-{seed}"
    stage(grpo, cfg, store, seed, run_id, executor)
    curve = Catalog(store).sql(CURVE, [run_id]).to_pylist()
    return {"start": curve[0]["correct"], "end": curve[-1]["correct"], "curve": curve,
            "policy": policy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny",
                        help="a model folder or name; tiny (default): the <1M test model, built "
                             "offline, which the learning rates here suit")
    parser.add_argument("--store", default="./alignflow-store")
    parser.add_argument("--task", default="alignflow:arith-2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft-steps", type=int, default=150)
    parser.add_argument("--iterations", type=int, default=30)
    args = parser.parse_args()
    model = args.model
    if model == "tiny":
        from alignflow.tasks.zoo.registry import models_dir
        from alignflow.tasks.zoo.tiny import build_tiny_model

        model = str(build_tiny_model(models_dir() / "tiny-llama"))
    out = learn(model, args.store, task=args.task, seed=args.seed,
                sft_steps=args.sft_steps, iterations=args.iterations)
    print(f"held-out correctness: {out['start']:.3f} after SFT -> {out['end']:.3f} after GRPO")


if __name__ == "__main__":
    main()
