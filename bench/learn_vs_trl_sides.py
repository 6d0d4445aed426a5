"""The two sides of `bench/learn_vs_trl.py`: the work both train on (one RLConfig, read
from the demo's settings, turned into TRL's GRPOConfig), each side's training, and each
side's per-step log (reward, loss, grad norm, lr), so that curves can be laid side by side
and the first step where the sides part found.

The LR schedule: alignflow's trainers build OpenRLHF's `cosine_with_min_lr` (transformers'
`get_cosine_with_min_lr_schedule_with_warmup`: step i at factor i, the first step at the
peak or, with a warmup, at 0); TRL is given the same name, so HF's Trainer builds the same
schedule (`tests/fast/test_learn_vs_trl_schedule.py` steps both).
"""

from __future__ import annotations

import math
from pathlib import Path

# transformers' name of the schedule alignflow's trainers build (`tasks/trainers/`)
TRL_SCHEDULE = "cosine_with_min_lr"
# TRL's log keys -> this bench's names (TRL logs the reward on the steps that generated)
TRL_KEYS = {"learning_rate": "lr", "grad_norm": "grad_norm", "loss": "loss",
            "reward": "reward", "entropy": "entropy", "clip_ratio/region_mean": "clip_frac",
            "completions/mean_length": "length"}
AF_KEYS = {"train/lr": "lr", "train/grad_norm": "grad_norm", "train/policy_loss": "loss",
           "train/entropy": "entropy", "train/clip_frac": "clip_frac"}


def settings(model: str, iterations: int, threads: int, sets: list[str]):
    """The demo's RLConfig for this work, with the in-run evaluation off (it is done
    outside the timings), the model and thread count given, and one resume checkpoint kept
    (a 135M one is ~1.6 GB: three filled the disk at 4 iterations; TRL saves none)."""
    from alignflow.flows.cli.demo import DEMO_SETS
    from alignflow.flows.config import load_config
    from alignflow.flows.rl.config import RLConfig

    return load_config(RLConfig, sets=[
        *DEMO_SETS, f"actor.model_name_or_path={model}", f"train.max_iterations={iterations}",
        "eval.dataset=null", "eval.steps=-1", "eval.at_start=false", f"num_threads={threads}",
        "ckpt.max_num=1", *sets])


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
    steps = cfg.optimizer_steps(train.max_iterations)
    return dict(
        output_dir=str(out), use_cpu=True, bf16=False, fp16=False, report_to=[],
        gradient_checkpointing=False, save_strategy="no", logging_steps=1,
        dataloader_num_workers=0, seed=seed, per_device_train_batch_size=train.micro_batch_size,
        gradient_accumulation_steps=train.batch_size // train.micro_batch_size,
        generation_batch_size=per_gen, num_generations=roll.n_samples_per_prompt,
        max_completion_length=roll.max_new_tokens, temperature=roll.temperature,
        top_p=roll.top_p, top_k=roll.top_k, max_steps=steps,
        num_iterations=1, beta=0.0, epsilon=actor.eps_clip, loss_type="dapo",
        scale_rewards="group", learning_rate=actor.adam.lr, adam_beta1=actor.adam.betas[0],
        adam_beta2=actor.adam.betas[1], adam_epsilon=actor.adam.eps,
        weight_decay=actor.adam.weight_decay, max_grad_norm=actor.max_norm,
        warmup_steps=math.ceil(actor.lr_warmup_ratio * steps), lr_scheduler_type=TRL_SCHEDULE,
        lr_scheduler_kwargs={"min_lr_rate": actor.min_lr_ratio})


def _correct(completions: list[str], label: list[str], **_kwargs) -> list[float]:
    """The reward on TRL's side: `rule:correct`'s check, imported from alignflow."""
    from alignflow.tasks.rewards.answers import is_correct

    return [float(is_correct(c, lab)) for c, lab in zip(completions, label, strict=True)]


def trl_log(history: list[dict]) -> list[dict]:
    """TRL's per-step log (`trainer.state.log_history`) under this bench's names."""
    return [{"step": int(h["step"]), **{ours: float(h[k]) for k, ours in TRL_KEYS.items()
                                        if k in h}}
            for h in history if "step" in h and "train_runtime" not in h]


def stop_ids(tok, stops: tuple[str, ...]) -> list[int]:
    """The tokens whose text holds a stop string: ending a response at the first of them is
    alignflow's `rollout.stop` (the stopping token kept) when each stop is one character,
    which no token boundary can split; TRL stops and masks at its EOS ids, so these join them."""
    assert all(len(s) == 1 for s in stops), f"stop strings of one character only: {stops}"
    return [i for i in range(len(tok)) if any(s in tok.decode([i]) for s in stops)]


def train_trl(cfg, seed: int, out: Path) -> dict:
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from alignflow.tasks.steps.generate import eos_ids

    path = cfg.actor.model_name_or_path
    tok, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
    if cfg.rollout.stop:  # TRL reads its EOS ids from the model's generation config
        model.generation_config.eos_token_id = sorted({*eos_ids(tok),
                                                       *stop_ids(tok, cfg.rollout.stop)})
    data = datasets.Dataset.from_list(prompts(cfg, "train"))
    trainer = GRPOTrainer(model=model, reward_funcs=[_correct], processing_class=tok,
                          args=GRPOConfig(**trl_args(cfg, seed, out / "trl")), train_dataset=data)
    trainer.train()
    model.generation_config.eos_token_id = list(eos_ids(tok))  # the saved model as it came
    trainer.save_model(str(out / "model"))
    tok.save_pretrained(out / "model")
    return {"model": str(out / "model"), "steps": trainer.state.global_step,
            "log": trl_log(trainer.state.log_history)}


def alignflow_log(store, run_id: str) -> list[dict]:
    """alignflow's per-iteration log: the rollouts' mean reward and length, and the learn
    step's metrics (each the mean over the iteration's optimizer steps)."""
    from alignflow.catalog.catalog import Catalog

    catalog = Catalog(store)
    rows = {r["iteration"]: {"iteration": r["iteration"], "reward": r["reward"],
                             "length": r["length"]}
            for r in catalog.sql("SELECT iteration, avg(reward) AS reward, avg(response_len) "
                                 "AS length FROM rollouts WHERE run_id = ? GROUP BY iteration",
                                 [run_id]).to_pylist()}
    for m in catalog.sql("SELECT step, key, value FROM metrics WHERE run_id = ? AND "
                         "task_key LIKE '%/learn'", [run_id]).to_pylist():
        if m["key"] in AF_KEYS and m["step"] in rows:
            rows[m["step"]][AF_KEYS[m["key"]]] = m["value"]
    return [rows[i] for i in sorted(rows)]


def train_alignflow(cfg, seed: int, out: Path) -> dict:
    from alignflow.flows.control import api
    from alignflow.flows.rl.grpo import grpo

    store = api.open_store(str(out / "store"))
    res = api.run(grpo, cfg, run_id="bench", store=store, seed=seed, executor="auto")
    return {"model": str(out / "store" / res["model"]), "iterations": res["iterations"],
            "log": alignflow_log(store, "bench")}
