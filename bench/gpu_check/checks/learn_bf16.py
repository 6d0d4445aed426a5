"""Learning on a GPU in bf16, and the engine-vs-trainer log-prob gap (issue 43's GPU check).

1. The pipeline of `examples/learn_arith.py` (SFT on alignflow:arith-slip-3, then GRPO on
   alignflow:arith-3, greedy evaluation on its 200 held-out problems before GRPO's first
   iteration and after its last), seed 0, `--executor inline`, a local store under
   `common.out_dir()`. On CUDA (mode "gpu"): a random-init Llama of ~104M parameters built
   from a config (the tiny tokenizer's 512-id vocabulary: nothing to download), bf16
   weights with fp32 masters (`ds.param_dtype=bf16`), SFT and GRPO on the GPU, the HF
   engine (vLLM cannot travel to the node), the example's schedule but 1600 SFT steps of 32 (the CPU default is 3200;
   30 GRPO iterations of 64 prompts × 8) and its batch settings; its learning rates are
   scaled by tiny width / width (Adam's μP rule: 768 is 12× the tiny model's 64), which
   gives the example's own rates on the tiny model (`lr=example` keeps them unscaled).
   Without CUDA, or given `cpu` (mode "cpu"): the same on the tiny model in fp32 with a
   short schedule (`sft=N`, `iterations=N` set it), so a CPU test runs every line.
   Figures: the held-out curve (from `eval_results` through the catalog), each stage's
   seconds (its tasks' manifests), the device (`torch.cuda.get_device_name`), the mode.
2. The gap: the SFT export (the weights GRPO's first iteration samples with) loaded as the
   flow loads it (bf16 on the GPU), the HF engine samples 8 responses to each prompt GRPO
   drew, as the flow's generate step does, and returns its per-token behaviour log-probs;
   `tasks/rl/correction.proximal_logprobs` (the learn step's π_old forward) scores the same
   tokens with the same weights. Figures: quantiles of |Δ log p| (p50, p90, p99, max) and
   the share of tokens with exp(Δ) outside [0.8, 1.2]. The check fails when the max passes
   `LIMITS[mode]`; `perturb` samples at temperature 2 while π_old scores at 1.0 (the
   gap of vLLM's raw log-probs had its engine not rescaled them), to show it fails.

Time on an H200 (estimated, nothing measured yet): building the model ~5 s, SFT ~60-90 s
(1600 steps at ~40 ms of compute and step overhead), GRPO ~90-120 s (30 iterations of
4 rollout micro-batches × 4 decode steps, a π_old pass, one optimizer step and a ~1.2 GB
checkpoint each, plus two evaluations), the gap ~10 s: ~4 min under the 480 s limit.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.gpu_check.checks.common import CheckFailed, out_dir, run, tiny_model_dir

if TYPE_CHECKING:
    import torch
    from transformers import LlamaConfig

RUN_ID = "learn-bf16"
SEED = 0
GPU_MODEL = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                 num_attention_heads=12, num_key_value_heads=4)  # 103.9M parameters
CPU_SCHEDULE = (16, 2)  # SFT steps, GRPO iterations: the CPU test's short run
GPU_SFT_STEPS = 1600  # the time estimate below (the example's CPU default is 3200)
ROLLOUT = dict(n=8, max_new_tokens=4, micro=128)  # examples/learn_arith.grpo_sets
KEPT_OUT = ("config.json", "model.safetensors")  # the tiny model's own: not copied
MAX_PROMPTS = 1024
RATIO = (0.8, 1.2)
PERTURBED_TEMPERATURE = 2.0
# fp32 on the CPU, one module for both sides: the KV-cached decode and the full forward
# differ by rounding only. Worst case: unit roundoff 2^-24 × the longest sum (512, the
# vocabulary's softmax normaliser) × 3 stages (2 layers and the head) × 2 (the logit and
# its logsumexp) × 16 (a generous |logit|): 2.9e-3, 10× under bf16's roundoff 2^-9 on such
# a logit (correction.py measured 9.5e-7).
CPU_BOUND = 2.0**-24 * 512 * 3 * 2 * 16
LIMITS = {"cpu": CPU_BOUND, "gpu": 0.5}  # gpu: tests/gpu's BF16_MISMATCH (bf16 vLLM)
CPU_CURVE_SEED0 = (0.755, 0.900)  # tests/learning: seed 0, the full schedule on the CPU (GRPO 33 up, 4 down)
PROMPTS = ("SELECT prompt_id, any_value(prompt_ids) AS ids FROM rollouts WHERE run_id = ? "
           "AND starts_with(task_key, 'grpo/') GROUP BY prompt_id ORDER BY prompt_id")


def options(argv: list[str], cuda: bool) -> dict:
    """The run's settings from the argument words: `cpu`, `perturb`, `keep`, `lr=example`,
    `sft=N`, `iterations=N`."""
    from examples.learn_arith import ITERATIONS

    words: dict[str, str] = {w.split("=", 1)[0]: w.split("=", 1)[-1] for w in argv}
    mode = "gpu" if cuda and "cpu" not in words else "cpu"
    sft, its = (GPU_SFT_STEPS, ITERATIONS) if mode == "gpu" else CPU_SCHEDULE
    return {"mode": mode, "sft_steps": int(words.get("sft", sft)),
            "iterations": int(words.get("iterations", its)),
            "perturb": "perturb" in words, "keep": "keep" in words,
            "scale_lr": words.get("lr") != "example"}


def gpu_config(tiny: Path) -> LlamaConfig:
    """The GPU model's LlamaConfig: `GPU_MODEL`'s widths, the tiny model's other settings
    (vocabulary, special ids, RoPE; its head size follows from the new widths)."""
    from transformers import LlamaConfig

    base = LlamaConfig.from_pretrained(tiny).to_dict()
    return LlamaConfig(**{k: v for k, v in base.items() if k != "head_dim"} | GPU_MODEL)


def build_model(folder: Path, mode: str) -> tuple[str, int, int]:
    """The model folder, its parameter count and width: the tiny model itself on the CPU;
    on the GPU a random-init Llama of `gpu_config` with the tiny model's tokenizer, chat
    template and generation config."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tiny = Path(tiny_model_dir())
    if mode == "cpu":
        base = LlamaConfig.from_pretrained(tiny)
        params = sum(p.numel() for p in LlamaForCausalLM(base).parameters())
        return str(tiny), params, base.hidden_size
    torch.manual_seed(SEED)
    with torch.device("cuda"):
        model = LlamaForCausalLM(gpu_config(tiny))
    model.save_pretrained(folder)
    for item in tiny.iterdir():
        if item.is_file() and item.name not in KEPT_OUT and not item.name.startswith("."):
            shutil.copy(item, folder / item.name)
    return str(folder), sum(p.numel() for p in model.parameters()), GPU_MODEL["hidden_size"]


def stage_sets(mode: str, width: int, scale_lr: bool) -> tuple[list[str], list[str]]:
    """The `--set`s added to the example's SFT and GRPO settings: the GPU and bf16 on the
    GPU; the HF engine always; learning rates scaled by tiny width / width."""
    from alignflow.tasks.zoo.tiny import MODEL_CONFIG
    from examples.learn_arith import SFT_LR

    scale = MODEL_CONFIG["hidden_size"] / width if scale_lr else 1.0
    sft = [f"adam.lr={SFT_LR * scale:.3g}"]
    grpo = ["rollout.engine=hf", f"actor.adam.lr={1e-3 * scale:.3g}"]
    if mode == "gpu":
        sft += ["ds.param_dtype=bf16", "placement.num_gpus=1"]
        grpo += ["ds.param_dtype=bf16", "actor.num_gpus_per_node=1", "train.colocate_all=true"]
    return sft, grpo


def run_pipeline(store: str, model: str, opts: dict, width: int) -> tuple[dict, float]:
    """`learn_arith` as one durable run: its output and wall seconds."""
    import alignflow
    from examples.learn_arith import learn_arith

    sft, grpo = stage_sets(opts["mode"], width, opts["scale_lr"])
    cfg = {"model": model, "sft_steps": opts["sft_steps"], "iterations": opts["iterations"],
           "sft": sft, "stages": {"grpo": grpo}}
    start = time.perf_counter()
    out = alignflow.run(learn_arith, cfg, store=store, seed=SEED, run_id=RUN_ID,
                        executor="inline")
    return out, time.perf_counter() - start


def stage_seconds(store: str) -> dict[str, float]:
    """Seconds of each stage's committed tasks (their manifests' start and end)."""
    from alignflow.artifacts.store import Store
    from alignflow.flows.journal import runs

    manifests = runs.read_manifests(Store.open(store), RUN_ID)
    return {stage: round(sum(m["ended"] - m["started"] for key, m in manifests.items()
                             if key.startswith(f"{stage}/")), 2) for stage in ("sft", "grpo")}


def held_out(store: str) -> dict:
    """The held-out curve of the GRPO stage, and the prompts GRPO drew (token ids)."""
    from alignflow.catalog.catalog import Catalog
    from examples.learn_arith import curve

    points = curve(store, RUN_ID, "grpo")
    prompts = [r["ids"] for r in Catalog(store).sql(PROMPTS, [RUN_ID]).to_pylist()]
    return {"curve": [{k: p[k] for k in ("iteration", "correct", "n")} for p in points],
            "prompts": prompts[:MAX_PROMPTS]}


def quantiles(delta: torch.Tensor) -> dict[str, float]:
    """|Δ log p| at p50, p90, p99 and max, and the share of tokens with exp(Δ) outside
    [0.8, 1.2], over the tokens of `delta` (a 1-D float tensor)."""
    import torch

    gap = delta.abs().double()
    qs = torch.quantile(gap, torch.tensor([0.5, 0.9, 0.99], dtype=torch.float64)).tolist()
    ratio = delta.double().exp()
    outside = ((ratio < RATIO[0]) | (ratio > RATIO[1])).double().mean()
    return {"p50": qs[0], "p90": qs[1], "p99": qs[2], "max": float(gap.max()),
            "outside_0.8_1.2": float(outside), "tokens": gap.numel()}


def logprob_gap(model_dir: str, prompts: list[list[int]], mode: str, perturb: bool) -> dict:
    """The engine's behaviour log-probs beside π_old's forward of the same tokens, one
    module (as loaded by the flow) for both; quantiles of their difference."""
    from alignflow.tasks.engines.base import SamplingParams
    from alignflow.tasks.engines.hf import HFEngine
    from alignflow.tasks.modeling.batching import to_padded
    from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
    from alignflow.tasks.rl.correction import proximal_logprobs
    from alignflow.tasks.steps.generate import eos_ids

    dtype, device = ("bf16", "cuda") if mode == "gpu" else ("fp32", "cpu")
    model = load_causal_lm(model_dir, dtype=dtype).to(device)
    tok = load_tokenizer(model_dir, padding_side="left")
    engine = HFEngine(model, tok, micro_rollout_batch_size=ROLLOUT["micro"])
    params = SamplingParams(max_new_tokens=ROLLOUT["max_new_tokens"], n=ROLLOUT["n"],
                            temperature=PERTURBED_TEMPERATURE if perturb else 1.0,
                            eos_token_ids=eos_ids(tok), seed=SEED)
    start = time.perf_counter()
    samples = engine.generate(prompts, params)
    responses = [s.response_ids for s in samples]
    trainer = proximal_logprobs(model, [s.prompt_ids for s in samples], responses,
                                micro_batch=ROLLOUT["micro"], packed=False,
                                pad_id=tok.pad_token_id, temperature=1.0)
    width = trainer.shape[1]
    behaviour = to_padded([s.behaviour_logprobs for s in samples], width)
    mask = to_padded([[1.0] * len(r) for r in responses], width).bool()
    delta = (behaviour - trainer)[mask]
    return {"dtype": dtype, "samples": len(samples), "seconds": round(time.perf_counter() -
                                                                      start, 2),
            "engine_mean_logp": float(behaviour[mask].mean()),
            "trainer_mean_logp": float(trainer[mask].mean()), **quantiles(delta)}


def device_name(mode: str) -> str:
    """What the figures name: the GPU's model, or the CPU's architecture."""
    import platform

    import torch

    return torch.cuda.get_device_name() if mode == "gpu" else f"cpu ({platform.machine()})"


def verdict(figures: dict) -> dict:
    """Fails on a non-finite gap or a max |Δ log p| past the mode's limit."""
    gap, limit = figures["gap"], LIMITS[figures["mode"]]
    first, last = (p["correct"] for p in (figures["curve"][0], figures["curve"][-1]))
    figures["summary"] = (f"{figures['mode']} on {figures['device']}: held-out {first:.3f} "
                          f"after SFT -> {last:.3f} after GRPO; |d log p| p50 "
                          f"{gap['p50']:.2e} p99 {gap['p99']:.2e} max {gap['max']:.2e}, "
                          f"{gap['outside_0.8_1.2']:.2%} outside [0.8, 1.2]")
    if not math.isfinite(gap["max"]) or gap["max"] > limit:
        raise CheckFailed(f"engine vs trainer: max |d log p| {gap['max']:.3g} > {limit:.3g} "
                          f"({figures['mode']}, {gap['dtype']})", figures)
    return figures


def _learn_and_measure(work: Path, opts: dict) -> dict:
    """The pipeline in `work`, then the gap on its SFT export: every figure but the verdict."""
    from alignflow.artifacts.store import Store

    store = str(work / "store")
    model, params, width = build_model(work / "model", opts["mode"])
    out, wall = run_pipeline(store, model, opts, width)
    found = held_out(store)
    sft_model = Store.open(store).path(out["sft"])
    return {"mode": opts["mode"], "device": device_name(opts["mode"]), "params": params,
            "seed": SEED, "sft_steps": opts["sft_steps"], "iterations": opts["iterations"],
            "sets": dict(zip(("sft", "grpo"), stage_sets(opts["mode"], width,
                                                         opts["scale_lr"]), strict=True)),
            "curve": found["curve"], "cpu_curve_seed0_full": CPU_CURVE_SEED0,
            "flow_seconds": round(wall, 2), "stage_seconds": stage_seconds(store),
            "gap": logprob_gap(sft_model, found["prompts"], opts["mode"], opts["perturb"]),
            "perturbed": opts["perturb"]}


def check(argv: list[str]) -> dict:
    import torch

    opts = options(argv, torch.cuda.is_available())
    work = out_dir() / "learn_bf16"
    shutil.rmtree(work, ignore_errors=True)  # a rerun in the same folder starts afresh
    (work / "model").mkdir(parents=True)
    try:
        figures = _learn_and_measure(work, opts)
    finally:
        if opts["mode"] == "gpu" and not opts["keep"]:
            shutil.rmtree(work, ignore_errors=True)  # GBs of checkpoints; the figures suffice
    return verdict(figures)


if __name__ == "__main__":
    run(check)
