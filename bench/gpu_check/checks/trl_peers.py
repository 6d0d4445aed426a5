"""TRL beside alignflow on this GPU (issue 46): SFT, DPO and GRPO on a random-init ~1B
Llama in bf16, HF generation on both sides (`bench/peers_gpu.py`, each side in its own
process); tokens/s, MFU and peak memory of each, and alignflow ÷ TRL tokens/s per kind.

Fails only when a side could not run (TRL missing from the bundle, a crash); the figures
are for the record, the target (alignflow ≥ TRL's tokens/s) is read from them. `cpu` as
argument rehearses it at the tiny size on the CPU.
"""

from __future__ import annotations

import importlib.util

from bench.gpu_check.checks.common import CheckFailed, cuda, out_dir, run


def check(argv: list[str]) -> dict:
    rehearse = argv[:1] == ["cpu"]
    if not rehearse:
        cuda()
    if importlib.util.find_spec("trl") is None:
        raise CheckFailed("TRL is not importable: the bundle carries it (bench/gpu_bundle/"
                          "pins.py); install the bundle, or pip install -e '.[bench]'")
    from bench.peers_gpu import main

    size = ["--size", "tiny", "--cpu"] if rehearse else ["--size", "1b"]
    rows = main([*size, "--json", str(out_dir() / "trl_peers.json")])
    by = {(r["kind"], r["side"]): r for r in rows}
    figures: dict = {"rows": rows}
    parts = []
    for kind in ("sft", "dpo", "grpo"):
        ours, trl = by.get((kind, "alignflow")), by.get((kind, "trl"))
        if ours is None or trl is None:
            raise CheckFailed(f"{kind}: a side did not report", figures)
        ratio = round(ours["tokens_per_s"] / trl["tokens_per_s"], 3)
        figures[f"{kind}_alignflow_vs_trl_tokens_per_s"] = ratio
        parts.append(f"{kind} {ratio:.2f}x")
    figures["summary"] = (f"alignflow ÷ TRL tokens/s: {', '.join(parts)} "
                          f"({rows[0]['params'] / 1e9:.2f}B params, {rows[0]['device']})")
    return figures


if __name__ == "__main__":
    run(check)
