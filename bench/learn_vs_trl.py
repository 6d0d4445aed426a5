"""TRL's GRPOTrainer and alignflow's GRPO side by side on the demo's task (issue 43): the
same model, prompts, seeds and hyperparameters; held-out greedy accuracy at the start and
after the same number of steps, and each side's wall time and CPU seconds, per seed.

    .venv/bin/python bench/learn_vs_trl.py [--seeds 1,2,3] [--iterations 8]
        [--model smollm2-135m|tiny|PATH] [--sides alignflow,trl] [--trl-python PY]
        [--set KEY=VALUE ...] [--json FILE]

The work is the demo's (`flows/cli/demo.py` DEMO_SETS, read here and turned into TRL's
arguments, so one list sets both sides): `alignflow:arith`, the first 64 training problems
in SmolLM2's chat written out, 8 prompts x 8 samples per generation, 16 new tokens,
temperature 1, the exact answer as the only reward, group-normalised advantages, PPO clip
0.2 on token-mean losses (TRL `loss_type=dapo`), β 0 on both (no reference model), AdamW
with alignflow's betas, the linear warmup + half cosine to `min_lr_ratio` (TRL
`cosine_with_min_lr`), two optimizer steps per generation. HF generation on both sides
(alignflow's HF engine on a CPU; TRL without vLLM), fp32, the same torch thread count and
the glibc allocator settings of the Makefile. Differences left: the order in which each
side's sampler visits the 64 prompts (both seeded), and each side's random draws.

Each side trains in a fresh process measured from outside (`bench/peer_measure.py`: wall,
CPU seconds and peak RSS of the process tree, model load and save included); the held-out
evaluation (the first 64 `test` problems, greedy, `rule:correct`'s check) runs afterwards
here, the same code for the start model and both trained ones, outside the timings.
TRL runs in its own venv (`.venv-trl`, `make bench-trl`); without one the TRL side is
left out, said in one line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peer_measure import measure  # noqa: E402

TRL_VENV = ROOT / ".venv-trl"
ENV = {"TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error",
       "MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824"}


def settings(model: str, iterations: int, threads: int, sets: list[str]):
    """The demo's RLConfig for this work, with the in-run evaluation off (it is done here,
    outside the timings) and the model and thread count given."""
    from alignflow.flows.cli.demo import DEMO_SETS
    from alignflow.flows.config import load_config
    from alignflow.flows.rl.config import RLConfig

    return load_config(RLConfig, sets=[
        *DEMO_SETS, f"actor.model_name_or_path={model}", f"train.max_iterations={iterations}",
        "eval.dataset=null", "eval.steps=-1", "eval.at_start=false", f"num_threads={threads}",
        *sets])


def prompts(cfg, split: str) -> list[dict]:
    """`{prompt, label}` of `split` as alignflow's prompt step reads them (the first
    `data.max_samples` rows, `data.input_template` applied), in dataset order."""
    from alignflow.tasks.data.loading import mix_datasets
    from alignflow.tasks.data.named import with_own_columns
    from alignflow.tasks.data.prompts import prepare_prompts

    data = with_own_columns(cfg.data, cfg.data.prompt_dataset)
    rows = prepare_prompts(
        mix_datasets(data.prompt_dataset, split=split, max_samples=data.max_samples),
        input_key=data.input_key, label_key=data.label_key, input_template=data.input_template,
        apply_chat_template=data.apply_chat_template).rows
    return [{"prompt": r["prompt"], "label": r["label"]} for r in rows]


def trl_args(cfg, seed: int, out: Path) -> dict:
    """GRPOConfig's arguments for the same work as `cfg` on alignflow's side."""
    assert cfg.algo.kl.init_coef == 0 and cfg.algo.advantage.estimator == "group_norm"
    assert cfg.algo.loss_agg == "token-mean" and cfg.train.max_epochs == 1
    actor, roll, train = cfg.actor, cfg.rollout, cfg.train
    per_gen = roll.batch_size * roll.n_samples_per_prompt
    steps = train.max_iterations * per_gen // train.batch_size
    return dict(
        output_dir=str(out), use_cpu=True, bf16=False, fp16=False, report_to=[],
        gradient_checkpointing=False, save_strategy="no", logging_steps=10_000,
        dataloader_num_workers=0, seed=seed, per_device_train_batch_size=train.micro_batch_size,
        gradient_accumulation_steps=train.batch_size // train.micro_batch_size,
        generation_batch_size=per_gen, num_generations=roll.n_samples_per_prompt,
        max_completion_length=roll.max_new_tokens, temperature=roll.temperature, top_p=1.0,
        top_k=0, max_steps=steps,
        num_iterations=1, beta=0.0, epsilon=actor.eps_clip, loss_type="dapo",
        scale_rewards="group", learning_rate=actor.adam.lr, adam_beta1=actor.adam.betas[0],
        adam_beta2=actor.adam.betas[1], adam_epsilon=actor.adam.eps,
        weight_decay=actor.adam.weight_decay, max_grad_norm=actor.max_norm,
        warmup_steps=math.ceil(actor.lr_warmup_ratio * steps), lr_scheduler_type="cosine_with_min_lr",
        lr_scheduler_kwargs={"min_lr_rate": actor.min_lr_ratio})


def _correct(completions: list[str], label: list[str], **_kwargs) -> list[float]:
    """The reward on TRL's side: `rule:correct`'s check, imported from alignflow."""
    from alignflow.tasks.rewards.answers import is_correct

    return [float(is_correct(c, lab)) for c, lab in zip(completions, label, strict=True)]


def train_trl(cfg, seed: int, out: Path) -> dict:
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    path = cfg.actor.model_name_or_path
    tok, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
    data = datasets.Dataset.from_list(prompts(cfg, "train"))
    trainer = GRPOTrainer(model=model, reward_funcs=[_correct], processing_class=tok,
                          args=GRPOConfig(**trl_args(cfg, seed, out / "trl")), train_dataset=data)
    trainer.train()
    trainer.save_model(str(out / "model"))
    tok.save_pretrained(out / "model")
    return {"model": str(out / "model"), "steps": trainer.state.global_step}


def train_alignflow(cfg, seed: int, out: Path) -> dict:
    from alignflow.flows.control import api
    from alignflow.flows.rl.grpo import grpo

    store = api.open_store(str(out / "store"))
    res = api.run(grpo, cfg, run_id="bench", store=store, seed=seed, executor="auto")
    return {"model": str(out / "store" / res["model"]), "iterations": res["iterations"]}


def evaluate(cfg, model_dir: str, rows: list[dict]) -> float:
    """Held-out greedy accuracy of `model_dir`: one left-padded batch, HF generate."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from alignflow.tasks.rewards.answers import is_correct

    tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    tok.pad_token = tok.pad_token or tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    enc = tok([r["prompt"] for r in rows], return_tensors="pt", padding=True,
              add_special_tokens=False)
    with torch.no_grad():
        gen = model.generate(**enc, do_sample=False, max_new_tokens=cfg.rollout.max_new_tokens,
                             pad_token_id=tok.pad_token_id)
    texts = tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return sum(is_correct(t, r["label"]) for t, r in zip(texts, rows, strict=True)) / len(rows)


def _side_cmd(side: str, python: str, a: argparse.Namespace, seed: int, out: Path) -> list[str]:
    return [python, str(Path(__file__).resolve()), "--one", side, "--seeds", str(seed),
            "--iterations", str(a.iterations), "--model", a.model_path,
            "--threads", str(a.threads), "--out", str(out), *(f"--set={s}" for s in a.sets)]


def run_side(side: str, python: str, a: argparse.Namespace, seed: int, cfg) -> dict:
    """Train one side in a fresh, measured process; evaluate its model here."""
    out = Path(tempfile.mkdtemp(prefix=f"learn-{side}-{seed}-", dir=a.tmp))
    env = dict(os.environ, **ENV, OMP_NUM_THREADS=str(a.threads),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    load = os.getloadavg()[0]
    res = measure(_side_cmd(side, python, a, seed, out), env, cwd=str(out))
    if res["rc"] != 0:
        raise RuntimeError(f"{side} seed {seed} failed (exit {res['rc']}):\n{res['tail']}")
    info = json.loads((out / "side.json").read_text())
    return {"seed": seed, "side": side, "load": load, **info,
            "end": evaluate(cfg, info["model"], prompts(cfg, "test")),
            **{k: res[k] for k in ("wall_s", "cpu_s", "peak_rss_mib")}}


def trl_python(given: str | None) -> str | None:
    """The interpreter with TRL: `--trl-python`, else `.venv-trl`, else this one if it has
    TRL; None (the side left out) otherwise."""
    import importlib.util

    for py in (given, TRL_VENV / "bin" / "python"):
        if py and Path(py).exists():
            return str(py)
    return sys.executable if importlib.util.find_spec("trl") else None


def table(rows: list[dict], start: float, n_eval: int) -> str:
    lines = [f"held-out greedy accuracy on {n_eval} problems; start (both sides): {start:.3f}",
             "| seed | side | start | end | command s | CPU s | peak RSS MiB | load |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['seed']} | {r['side']} | {start:.3f} | {r['end']:.3f} | {r['wall_s']:.0f} "
              f"| {r['cpu_s']:.0f} | {r['peak_rss_mib']:.0f} | {r['load']:.1f} |" for r in rows]
    for side in dict.fromkeys(r["side"] for r in rows):
        mine = [r for r in rows if r["side"] == side]
        ends = [r["end"] for r in mine]
        lines.append(f"{side}: end accuracy mean {statistics.mean(ends):.3f} (range "
                     f"{min(ends):.3f}-{max(ends):.3f}); mean command "
                     f"{statistics.mean(r['wall_s'] for r in mine):.0f}s, CPU "
                     f"{statistics.mean(r['cpu_s'] for r in mine):.0f}s")
    return "\n".join(lines)


def _one(a: argparse.Namespace) -> None:
    """One side's training, in this process (the measured child)."""
    import torch

    torch.set_num_threads(a.threads)
    cfg = settings(a.model, a.iterations, a.threads, a.sets)
    train = train_trl if a.one == "trl" else train_alignflow
    info = train(cfg, int(a.seeds), Path(a.out))
    (Path(a.out) / "side.json").write_text(json.dumps(info))


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--iterations", type=int, default=8, help="generations (2 steps each)")
    p.add_argument("--model", default="smollm2-135m", help="a zoo name or a model folder")
    p.add_argument("--sides", default="alignflow,trl")
    p.add_argument("--trl-python", help="the interpreter with TRL (default .venv-trl's)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a demo setting on both sides")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--one", choices=["alignflow", "trl"], help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict]:
    a = parse(argv)
    if a.one:
        _one(a)
        return []
    from alignflow.tasks.zoo.registry import resolve_model

    a.model_path = str(resolve_model("tiny-llama" if a.model == "tiny" else a.model))
    a.tmp = tempfile.mkdtemp(prefix="bench-learn-vs-trl-")
    cfg = settings(a.model_path, a.iterations, a.threads, a.sets)
    pythons = {"alignflow": sys.executable, "trl": trl_python(a.trl_python)}
    sides = [s for s in a.sides.split(",") if pythons[s]]
    if len(sides) < len(a.sides.split(",")):
        print("TRL is not installed (make bench-trl builds .venv-trl): its side is left out")
    test = prompts(cfg, "test")
    try:  # the trained models (~0.5 GB each at 135M) go with the temp folder
        start = evaluate(cfg, a.model_path, test)
        print(f"start: held-out greedy accuracy {start:.3f} ({len(test)} problems)", flush=True)
        rows = []
        for seed in map(int, a.seeds.split(",")):
            for side in sides:
                rows.append(run_side(side, pythons[side], a, seed, cfg))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(a.tmp, ignore_errors=True)
    print(table(rows, start, len(test)))
    if a.json:
        Path(a.json).write_text(json.dumps({"start": start, "rows": rows}, indent=1))
    return [{**r, "start": start} for r in rows]


if __name__ == "__main__":
    main()
