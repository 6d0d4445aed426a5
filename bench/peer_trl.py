"""TRL's side of `bench/peers.py`: DPOTrainer, SFTTrainer and GRPOTrainer on the same work.

TRL's defaults that would change the work are switched off to match alignflow and the
floor: bf16 (on by default in TRL 1.16, 9-16x slower on a CPU without bf16 instructions)
and gradient checkpointing (recomputes activations); fp32, CPU, no logging or saving.
Each function returns the seconds of `trainer.train()`.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.peer_setup import Work, reward


def _common(work: Work, gpu: bool = False) -> dict:
    """On a GPU (`bench/peers_gpu.py`): bf16, as alignflow's `ds.param_dtype=bf16` there."""
    return dict(output_dir=tempfile.mkdtemp(prefix="bench-trl-"), use_cpu=not gpu, bf16=gpu,
                fp16=False, gradient_checkpointing=False, report_to=[], save_strategy="no",
                logging_steps=10_000, dataloader_num_workers=0, learning_rate=work.lr,
                max_grad_norm=1.0, seed=0)


def _models(model_dir: Path, n: int):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir), *(
        AutoModelForCausalLM.from_pretrained(model_dir) for _ in range(n))


def _dataset(data: Path):
    import datasets

    return datasets.load_dataset("json", data_files=str(data), split="train")


def _train(trainer) -> float:
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start


def dpo(model_dir: Path, data: Path, work: Work, gpu: bool = False) -> float:
    from trl import DPOConfig, DPOTrainer

    tok, model, ref = _models(model_dir, 2)
    args = DPOConfig(**_common(work, gpu), per_device_train_batch_size=work.batch,
                     gradient_accumulation_steps=1, num_train_epochs=1,
                     max_length=work.max_len, beta=work.beta)
    return _train(DPOTrainer(model=model, ref_model=ref, args=args,
                             train_dataset=_dataset(data), processing_class=tok))


def sft(model_dir: Path, data: Path, work: Work, gpu: bool = False) -> float:
    from trl import SFTConfig, SFTTrainer

    tok, model = _models(model_dir, 1)
    ds = _dataset(data).map(lambda r: {"prompt": r["input"], "completion": r["output"]},
                            remove_columns=["input", "output"])
    args = SFTConfig(**_common(work, gpu), per_device_train_batch_size=work.batch,
                     gradient_accumulation_steps=1, num_train_epochs=1,
                     max_length=work.max_len, packing=False)
    return _train(SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok))


def _reward(completions: list[str], **_kwargs) -> list[float]:
    return [reward(c) for c in completions]


def grpo(model_dir: Path, data: Path, work: Work, gpu: bool = False) -> float:
    """One generation of `prompts x samples` and its optimizer steps (beta = 0: no
    reference model, as alignflow with algo.kl.init_coef=0; `dapo`: the step's token sum
    over its tokens, alignflow's token-mean; a step per generation: no π_old pass)."""
    from trl import GRPOConfig, GRPOTrainer

    tok, model = _models(model_dir, 1)
    per_gen = work.prompts * work.samples
    accumulation = work.rl_batch // work.rl_micro
    args = GRPOConfig(**_common(work, gpu), per_device_train_batch_size=work.rl_micro,
                      gradient_accumulation_steps=accumulation, generation_batch_size=per_gen,
                      num_generations=work.samples, max_completion_length=work.new_tokens,
                      max_steps=per_gen // work.rl_batch, beta=0.0, loss_type="dapo",
                      temperature=1.0,
                      top_k=0, top_p=1.0, num_iterations=1)
    return _train(GRPOTrainer(model=model, reward_funcs=[_reward], args=args,
                              train_dataset=_dataset(data), processing_class=tok))
