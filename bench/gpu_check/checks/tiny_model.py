"""The tiny offline model: built on the node by the project's own recipe (in the wheel).

SmolLM2's prepared folder is 517 MB and cannot travel; the tiny Llama (<1M parameters, a
512-token BPE tokenizer trained on generated text) is built from code in seconds, and every
later check uses it. Needs no GPU.
"""

from __future__ import annotations

import time

from bench.gpu_check.checks.common import run, tiny_model_dir


def check(argv: list[str]) -> dict:
    from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
    from alignflow.tasks.zoo.cache import folder_bytes

    start = time.perf_counter()
    folder = tiny_model_dir()
    built = time.perf_counter() - start
    model = load_causal_lm(folder)
    tokenizer = load_tokenizer(folder)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}],
                                        add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) else ids
    params = sum(p.numel() for p in model.parameters())
    return {"folder": folder, "bytes": folder_bytes(folder), "params": params,
            "build_seconds": round(built, 2), "prompt_tokens": len(ids),
            "summary": f"{params:,} params, {folder_bytes(folder):,} bytes, "
                       f"built in {built:.1f} s"}


if __name__ == "__main__":
    run(check)
