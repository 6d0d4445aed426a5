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

import torch

NO_EOS = 10**9


def _setup(args):
    from alignflow.tasks.engines.hf import HFEngine
    from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
    from alignflow.tasks.zoo.registry import resolve_model

    path = resolve_model(args.model)
    model, tok = load_causal_lm(path).eval(), load_tokenizer(path, padding_side="left")
    engine = HFEngine(model, tok, micro_rollout_batch_size=args.prompts * args.n)
    texts = [f"Question {i}: what is {i} times {i + 3}? Think step by step." for i in
             range(args.prompts)]
    return engine, model, tok, [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def _engine_run(engine, prompts, args, seed: int) -> float:
    from alignflow.tasks.engines.base import SamplingParams

    params = SamplingParams(max_new_tokens=args.tokens, n=args.n, seed=seed, temperature=1.0,
                            eos_token_ids=(NO_EOS,))
    start = time.perf_counter()
    out = engine.generate(prompts, params)
    elapsed = time.perf_counter() - start
    assert all(len(s.response_ids) == args.tokens for s in out)
    return elapsed


def _hf_run(model, tok, prompts, args, seed: int) -> float:
    from alignflow.artifacts.tensors import pad_left

    ids, mask = pad_left([p for p in prompts for _ in range(args.n)], tok.pad_token_id)
    torch.manual_seed(seed)
    start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                         top_k=0, top_p=1.0, max_new_tokens=args.tokens,
                         min_new_tokens=args.tokens, eos_token_id=NO_EOS,
                         pad_token_id=tok.pad_token_id)
    elapsed = time.perf_counter() - start
    assert out.shape[1] == ids.shape[1] + args.tokens
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="tiny-llama")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--n", type=int, default=4)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    engine, model, tok, prompts = _setup(args)
    _engine_run(engine, prompts, args, 0), _hf_run(model, tok, prompts, args, 0)  # warm up
    times: dict[str, list[float]] = {"engine": [], "hf": []}
    for rep in range(args.reps):
        order = ("engine", "hf") if rep % 2 == 0 else ("hf", "engine")
        for side in order:
            run = _engine_run(engine, prompts, args, rep) if side == "engine" else \
                _hf_run(model, tok, prompts, args, rep)
            times[side].append(run)
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
