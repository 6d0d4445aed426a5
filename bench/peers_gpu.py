"""TRL and alignflow side by side on one GPU (issue 46): the same random-init Llama (~1B
parameters, bf16), SFT, DPO and GRPO (HF generation on both sides), each side in a fresh
process, printing tokens/s, MFU and peak GPU memory.

    python -m bench.peers_gpu [--size 1b|tiny] [--kinds sft,dpo,grpo] [--cpu] [--json FILE]

On an offline GPU node it runs as the node check `trl_peers`, TRL travelling in the bundle:
`bash bench/gpu_check.sh BUNDLE --only versions,trl_peers`. Without CUDA (or `--cpu`) it
runs in fp32 on the CPU; the tests run it so at `--size tiny`.

Both sides get the work of `bench/peer_setup.py` (the same β, reference pass, loss
aggregation and number of forward passes: `SAME_WORK`, printed), with `--executor inline`
and `ds.param_dtype=bf16` for alignflow, `bf16=True` for TRL. The model is random-init with
the tiny tokenizer's vocabulary (512 ids), so it ships as 0 bytes and any sampled id
decodes. Tokens are counted here, once, from the data (a random model almost never samples
EOS: GRPO responses run to `new_tokens`); FLOPs = 6·N per trained token, 2·N per
reference or generated token; MFU = FLOPs/s ÷ the device's dense bf16 peak
(`bench/gpu_throughput.py`'s table). Peak memory: `torch.cuda.max_memory_allocated` of the
side's process (on CPU: its peak RSS).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from bench.peer_setup import Work, same_work, tiny, write_data  # noqa: E402

SIZES = {  # Llama shapes: TinyLlama-1.1B's blocks (0.97B with a 512-id vocabulary); tiny
    "1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
               num_attention_heads=32, num_key_value_heads=4),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2),
}
GPU_WORK = Work(examples=64, batch=8, max_len=512, words=100, prompts=16, samples=4,
                new_tokens=128, rl_batch=64, rl_micro=8)


def random_model(folder: Path, size: str, bf16: bool) -> tuple[Path, int]:
    """The random-init model folder (tiny tokenizer) and its parameter count."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from alignflow.tasks.zoo.registry import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("tiny-llama"))
    torch.manual_seed(0)  # built on the GPU where there is one: a 1B init on a CPU takes long
    device = "cuda" if bf16 and torch.cuda.is_available() else "cpu"
    cfg = LlamaConfig(vocab_size=len(tok), max_position_embeddings=2048,
                      tie_word_embeddings=False, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, bos_token_id=None, **SIZES[size])
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16 if bf16 else torch.float32)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder, sum(p.numel() for p in model.parameters())


def work_tokens(kind: str, model: Path, data: Path, work: Work) -> dict[str, int]:
    """Trained, reference and generated tokens of one run of `kind` (the same each side)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    rows = [json.loads(line) for line in data.read_text().splitlines()]

    def n(text: str) -> int:
        return len(tok(text)["input_ids"])

    if kind == "sft":
        return {"train": sum(min(work.max_len, n(r["input"]) + n(r["output"]) + 1)
                             for r in rows), "ref": 0, "generated": 0}
    if kind == "dpo":
        pair = sum(min(work.max_len, n(r["prompt"]) + n(r[k]) + 1)
                   for r in rows for k in ("chosen", "rejected"))
        return {"train": pair, "ref": pair, "generated": 0}
    prompts = sum(n(r["prompt"]) for r in rows[:work.prompts]) * work.samples
    generated = work.prompts * work.samples * work.new_tokens
    return {"train": prompts + generated, "ref": 0, "generated": generated}


def side_command(side: str, kind: str, model: Path, data: Path, work: Work, out: Path,
                 cpu: bool) -> list[str]:
    return [sys.executable, "-m", "bench.peers_gpu", "--one", side, "--kind", kind,
            "--model", str(model), "--data", str(data), "--work", work.to_json(),
            "--out", str(out), *(["--cpu"] if cpu else [])]


def run_one(args: argparse.Namespace) -> None:
    """One side of one kind, in this process: {loop_s, peak_mib, device}."""
    import torch

    gpu = torch.cuda.is_available() and not args.cpu
    torch.set_num_threads(1 if not gpu else torch.get_num_threads())
    work = Work.from_json(args.work)
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    if args.one == "trl":
        from bench import peer_trl

        loop = getattr(peer_trl, args.kind)(Path(args.model), Path(args.data), work, gpu=gpu)
    else:
        loop = _alignflow(args, work, gpu)
    if gpu:
        peak, device = torch.cuda.max_memory_allocated() / 2**20, torch.cuda.get_device_name()
    else:
        import resource

        peak, device = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "cpu"
    Path(args.out).write_text(json.dumps({"loop_s": loop, "peak_mib": peak, "device": device}))


def _alignflow(args: argparse.Namespace, work: Work, gpu: bool) -> float:
    """`alignflow run KIND` as a user types it, in this process (inline: the model is here)."""
    from alignflow.cli import main as alignflow
    from bench.peers import alignflow_cmd, alignflow_loop

    store = Path(tempfile.mkdtemp(prefix="bench-peers-gpu-")) / "store"
    cmd = alignflow_cmd(args.kind, Path(args.model), Path(args.data), work, store, "inline")
    extra = ["--set", "ds.param_dtype=bf16"] if gpu else []
    extra += ["--set", "rollout.engine=hf"] if args.kind == "grpo" else []
    code = alignflow(cmd[1:] + extra)
    if code != 0:
        raise SystemExit(f"alignflow run {args.kind} failed (exit {code})")
    return alignflow_loop(args.kind, store)[0]


def figures(res: dict, tokens: dict[str, int], params: int, peak_tflops: float | None) -> dict:
    flops = 6 * params * tokens["train"] + 2 * params * (tokens["ref"] + tokens["generated"])
    out = {"tokens_per_s": round(tokens["train"] / res["loop_s"], 1),
           "loop_s": round(res["loop_s"], 3), "peak_mib": round(res["peak_mib"], 1),
           "device": res["device"]}
    if peak_tflops:
        out["mfu"] = round(flops / res["loop_s"] / (peak_tflops * 1e12), 4)
    return out


def _sides(wanted: list[str]) -> list[str]:
    import importlib.util

    if "trl" in wanted and importlib.util.find_spec("trl") is None:
        print("TRL is not installed (the `bench` extra, or the GPU bundle): its side is left "
              "out", flush=True)
    return [s for s in wanted if s != "trl" or importlib.util.find_spec("trl") is not None]


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=list(SIZES), default="1b")
    p.add_argument("--kinds", default="sft,dpo,grpo")
    p.add_argument("--sides", default="alignflow,trl")
    p.add_argument("--cpu", action="store_true", help="fp32 on the CPU even with CUDA")
    p.add_argument("--peak-tflops", type=float, help="the device's dense bf16 peak")
    p.add_argument("--json", help="write the rows here")
    for hidden in ("--one", "--kind", "--model", "--data", "--work", "--out"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        run_one(args)
        return []
    return _compare(args)


def _compare(args: argparse.Namespace) -> list[dict]:
    import torch

    gpu = torch.cuda.is_available() and not args.cpu
    work = GPU_WORK if gpu and args.size == "1b" else tiny()
    tmp = Path(tempfile.mkdtemp(prefix="bench-peers-gpu-"))
    model, params = random_model(tmp / "model", args.size, bf16=gpu)
    data = write_data(tmp / "data", work)
    peak = _peak(args.peak_tflops) if gpu else None
    rows = []
    for kind in args.kinds.split(","):
        print(f"same work, {kind}: {same_work(kind, work)}", flush=True)
        tokens = work_tokens(kind, model, data[kind], work)
        for side in _sides(args.sides.split(",")):
            out = tmp / f"{kind}-{side}.json"
            subprocess.run(side_command(side, kind, model, data[kind], work, out, not gpu),
                           cwd=ROOT, check=True)
            row = {"kind": kind, "side": side, "params": params, **tokens,
                   **figures(json.loads(out.read_text()), tokens, params, peak)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    _print_table(rows, work)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


def _peak(given: float | None) -> float | None:
    import torch

    from bench.gpu_throughput import peak_tflops

    return peak_tflops(torch.device("cuda", torch.cuda.current_device()), given)


def _print_table(rows: list[dict], work: Work) -> None:
    print(f"\n{dataclasses.asdict(work)}")
    print("| work | side | tokens/s | MFU | peak MiB | loop s | device |\n|---|---|---|---|---|---|---|")
    for r in rows:
        mfu = f"{r['mfu']:.1%}" if "mfu" in r else "-"
        print(f"| {r['kind']} | {r['side']} | {r['tokens_per_s']:.0f} | {mfu} | "
              f"{r['peak_mib']:.0f} | {r['loop_s']:.2f} | {r['device']} |")
    by = {(r["kind"], r["side"]): r for r in rows}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        if (kind, "trl") in by and (kind, "alignflow") in by:
            ratio = by[kind, "alignflow"]["tokens_per_s"] / by[kind, "trl"]["tokens_per_s"]
            print(f"{kind}: alignflow ÷ TRL tokens/s {ratio:.2f}x (target >= 1)")


if __name__ == "__main__":
    main()
