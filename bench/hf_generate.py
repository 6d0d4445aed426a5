"""The HF engine's generate vs `transformers.generate` on the same batch (target >= 0.98x).

Same model, prompts, sampling (temperature 1, no top-k/top-p) and length: every row runs to
`--tokens` new tokens (an EOS id that never occurs), so both sides decode the same number
of tokens. One batch of prompts x n rows on each side (the engine's micro-batch = all rows),
one torch thread, interleaved repetitions; prints each side's median tokens/s and the ratio.

    .venv/bin/python bench/hf_generate.py [--model tiny-llama|smollm2-135m|PATH] [--prompts 16]
        [--n 4] [--tokens 64] [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

NO_EOS = 10**9


def prompts_for(tok: Any, count: int) -> list[list[int]]:
    """`count` short arithmetic questions as token ids (no special tokens)."""
    return [tok(f"Question {i}: what is {i} times {i + 3}? Think step by step.",
                add_special_tokens=False)["input_ids"] for i in range(count)]


def generate_sides(model: Any, tok: Any, prompts: list[list[int]], n: int, tokens: int,
                   device: torch.device | None = None) -> dict[str, Callable[[int], None]]:
    """{"engine": run, "hf": run}: each `run(seed)` samples `n` rows per prompt to exactly
    `tokens` new tokens (temperature 1, no top-k/top-p, an EOS id that never occurs) with
    the HF engine and with `model.generate` on `device` (also bench/gpu_throughput.py's)."""
    from alignflow.artifacts.tensors import pad_left
    from alignflow.tasks.engines.base import SamplingParams
    from alignflow.tasks.engines.hf import HFEngine

    engine = HFEngine(model, tok, micro_rollout_batch_size=len(prompts) * n)
    ids, mask = pad_left([p for p in prompts for _ in range(n)], tok.pad_token_id)
    ids, mask = ids.to(device or ids.device), mask.to(device or ids.device)

    def with_engine(seed: int) -> None:
        params = SamplingParams(max_new_tokens=tokens, n=n, seed=seed, temperature=1.0,
                                eos_token_ids=(NO_EOS,))
        assert all(len(s.response_ids) == tokens for s in engine.generate(prompts, params))

    def with_generate(seed: int) -> None:
        torch.manual_seed(seed)
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                             temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=tokens,
                             min_new_tokens=tokens, eos_token_id=NO_EOS,
                             pad_token_id=tok.pad_token_id)
        assert out.shape[1] == ids.shape[1] + tokens
    return {"engine": with_engine, "hf": with_generate}


def _timed(run: Callable[[int], None], seed: int) -> float:
    start = time.perf_counter()
    run(seed)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="tiny-llama")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
    from alignflow.tasks.zoo.registry import resolve_model

    path = resolve_model(args.model)
    model, tok = load_causal_lm(path).eval(), load_tokenizer(path, padding_side="left")
    sides = generate_sides(model, tok, prompts_for(tok, args.prompts), args.n, args.tokens)
    for run in sides.values():
        run(0)  # warm up
    times: dict[str, list[float]] = {"engine": [], "hf": []}
    for rep in range(args.reps):
        for side in (("engine", "hf") if rep % 2 == 0 else ("hf", "engine")):
            times[side].append(_timed(sides[side], rep))
    tokens = args.prompts * args.n * args.tokens
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"model {args.model}, {args.prompts} prompts x {args.n} x {args.tokens} tokens, "
          f"1 thread, {args.reps} interleaved reps, load {os.getloadavg()[0]:.2f}")
    for side in ("engine", "hf"):
        print(f"{side:>6}: median {med[side]:.3f} s  {tokens / med[side]:,.0f} tok/s  "
              f"(all: {', '.join(f'{t:.3f}' for t in times[side])})")
    print(f"engine / transformers.generate speed: {med['hf'] / med['engine']:.3f}x")


if __name__ == "__main__":
    main()
