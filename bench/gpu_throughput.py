"""Throughput of alignflow's engines and trainers beside the same work written plainly, for
a GPU node (issue 25): generate tokens/s of the HF engine against `model.generate`; learn
tokens/s and MFU of the torch trainer (and DeepSpeed ZeRO-2 when it is installed) against
a plain PyTorch loop (AdamW, the same micro-batches, clipping and schedule-free LR). Sides
run interleaved, medians reported, each with its peak memory (CPU: the process's peak RSS
so far); the ratio is alignflow's
time over the plain one's (1.00 = the floor). vLLM cannot travel to the GPU node
(`bench/history/gpu.md`): its throughput is `bench/vllm_generate.py`'s, where vLLM is.

    python -m bench.gpu_throughput [--model tiny-llama|smollm2-135m|PATH] [--rows 64]
        [--seq 256] [--micro 16] [--new-tokens 64] [--reps 3] [--peak-tflops X] [--cpu]
        [--random-layers N]

On CUDA: bf16 autocast, MFU = 6·params·tokens/s ÷ the device's dense bf16 peak (a table by
device name, or --peak-tflops). Without CUDA (or --cpu): fp32 at the sizes given, no MFU —
the CPU test runs it this way, small, to keep it working until a GPU is lent.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from typing import Any

import torch

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


def device_of(args: argparse.Namespace) -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")


def peak_tflops(device: torch.device, given: float | None) -> float | None:
    """The dense bf16 peak of this GPU (None on CPU or an unknown card without --peak-tflops)."""
    if given or device.type != "cuda":
        return given
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Any, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def interleaved(sides: dict[str, Any], reps: int, device: torch.device) -> dict[str, dict]:
    """Each side once to warm up, then `reps` rounds in alternating order; medians."""
    for fn in sides.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in sides}
    peaks: dict[str, float] = {}
    names = list(sides)
    for rep in range(reps):
        for name in names if rep % 2 == 0 else names[::-1]:
            times[name].append(timed(sides[name], device))
            peaks[name] = max(peaks.get(name, 0.0), _peak_mib(device))
    return {k: {"seconds": statistics.median(v), "peak_mib": round(peaks[k], 1)}
            for k, v in times.items()}


def generate_sides(model: Any, tok: Any, args: argparse.Namespace, device: torch.device):
    """(sides, tokens per run): the HF engine and `model.generate`, one sample per prompt
    to `--new-tokens` each (`bench/hf_generate.py`'s sides, on `device`)."""
    from bench.hf_generate import generate_sides as sides_of
    from bench.hf_generate import prompts_for

    runs = sides_of(model, tok, prompts_for(tok, args.rows), 1, args.new_tokens, device)
    sides = {"hf_engine": lambda: runs["engine"](0), "model.generate": lambda: runs["hf"](0)}
    return sides, args.rows * args.new_tokens


def _lm_loss(model: Any, batch: dict) -> tuple[torch.Tensor, dict]:
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {}


def _plain_loop(model: Any, batches: list[dict], cfg: Any, bf16: bool):
    """The floor: AdamW with the trainer's hyperparameters, mean of the micro-batch losses,
    clipping at max_norm, one optimizer step per call."""
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps,
                            weight_decay=cfg.weight_decay)

    def step() -> None:
        for batch in batches:
            with torch.autocast(batch["input_ids"].device.type, torch.bfloat16, enabled=bf16):
                loss = _lm_loss(model, batch)[0] / len(batches)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def learn_setup(model: Any, args: argparse.Namespace, device: torch.device):
    """(trainer config, micro-batches, the plain loop's step on its own model copy): what
    every learn side of a comparison shares (bf16 on a GPU, fp32 on the CPU)."""
    from alignflow.tasks.trainers.config import TrainerConfig

    bf16 = device.type == "cuda"
    cfg = TrainerConfig(dtype="bf16" if bf16 else "fp32", total_steps=1000,
                        train_batch_size=args.rows, micro_train_batch_size=args.micro)
    ids = torch.randint(4, model.config.vocab_size, (args.rows, args.seq),
                        generator=torch.Generator().manual_seed(0)).to(device)
    batches = [{"input_ids": c} for c in ids.split(args.micro)]
    return cfg, batches, _plain_loop(copy.deepcopy(model).to(device).train(), batches, cfg,
                                     bf16)


def learn_sides(model: Any, args: argparse.Namespace, device: torch.device):
    """(sides, tokens per step): the torch trainer, DeepSpeed ZeRO-2 (when installed) and
    the plain loop, each on its own copy of the model, on the same micro-batches."""
    import importlib.util

    from alignflow.tasks.trainers.torch_trainer import TorchTrainer

    cfg, batches, plain = learn_setup(model, args, device)
    trainer = TorchTrainer(copy.deepcopy(model).to(device), cfg)
    sides = {"torch_trainer": lambda: trainer.step(batches, _lm_loss), "plain_loop": plain}
    if importlib.util.find_spec("deepspeed") is not None:
        from alignflow.tasks.trainers.deepspeed.section import DSConfig
        from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer

        ds = DeepSpeedTrainer(copy.deepcopy(model).to(device), cfg, DSConfig(zero_stage=2))
        sides["deepspeed_zero2"] = lambda: ds.step(batches, _lm_loss)
    return sides, args.rows * args.seq


def report(kind: str, results: dict, tokens: int, plain: str, extra: Any = None) -> list[dict]:
    """One row per side: tokens/s, peak memory, time over the plain side's."""
    rows = []
    for side, r in results.items():
        row = {"what": kind, "side": side, "tokens_per_s": round(tokens / r["seconds"], 1),
               "peak_mib": r["peak_mib"],
               "time_vs_plain": round(r["seconds"] / results[plain]["seconds"], 3)}
        if extra is not None:
            row |= extra(row)
        rows.append(row)
    return rows


def random_llama(layers: int, hidden: int | None = None) -> Any:
    """The sleep check's ~170M shape (its vocabulary holds any small tokenizer's ids), with
    `layers` blocks; `hidden` widens it (4x MLP, 64-wide heads, 4 query heads per KV head:
    16 layers at 2048 are ~1.1B)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from bench.gpu_check.checks.trainer_sleep import MODEL

    shape = {**MODEL, "num_hidden_layers": layers}
    if hidden:
        heads = max(1, hidden // 64)
        shape |= {"hidden_size": hidden, "intermediate_size": 4 * hidden,
                  "num_attention_heads": heads, "num_key_value_heads": max(1, heads // 4)}
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**shape))


def model_arguments(p: argparse.ArgumentParser) -> None:
    """The model, step shape and device flags of the GPU benches (this one and
    `bench/ds_zero_probe.py`)."""
    p.add_argument("--model", default="tiny-llama")
    p.add_argument("--random-layers", type=int, help="a random-init Llama of the sleep "
                   "check's width with this many layers (20: ~164M) and --model's tokenizer: "
                   "a model that fills a GPU more than the tiny one and travels as 0 bytes")
    p.add_argument("--random-hidden", type=int, help="the random model's width (default 768)")
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--micro", type=int, default=16)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--cpu", action="store_true")


def bench_model(args: argparse.Namespace) -> Any:
    """The random Llama the flags ask for, else --model loaded (fp32, on the CPU)."""
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.zoo.registry import resolve_model

    if args.random_layers:
        return random_llama(args.random_layers, args.random_hidden)
    return load_causal_lm(resolve_model(args.model))


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    model_arguments(p)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--peak-tflops", type=float)
    args = p.parse_args(argv)
    from alignflow.tasks.modeling.loading import load_tokenizer
    from alignflow.tasks.zoo.registry import resolve_model

    device = device_of(args)
    model = bench_model(args).to(device).eval()
    tok = load_tokenizer(resolve_model(args.model), padding_side="left")
    params = sum(p.numel() for p in model.parameters())
    peak = peak_tflops(device, args.peak_tflops)
    sides, tokens = generate_sides(model, tok, args, device)
    rows = report("generate", interleaved(sides, args.reps, device), tokens, "model.generate")
    sides, tokens = learn_sides(model, args, device)
    mfu = (lambda row: {"mfu": round(6 * params * row["tokens_per_s"] / (peak * 1e12), 4)}) \
        if peak else None
    rows += report("learn", interleaved(sides, args.reps, device), tokens, "plain_loop", mfu)
    head = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "model": f"random Llama, {args.random_layers} layers"
            + (f", hidden {args.random_hidden}" if args.random_hidden else "")
            if args.random_layers else args.model, "params": params, "peak_tflops": peak}
    rows = [head | row for row in rows]
    for row in rows:
        print(json.dumps(row))
    return rows


if __name__ == "__main__":
    main()
