"""The work every side of `bench/peers.py` does, built once: the model, the data, the
settings, so alignflow, TRL and the plain PyTorch floor train on identical inputs.

Model: a 5.28M-parameter Llama (hidden 256, 7 layers, 4 heads / 2 kv heads, MLP 704) with
the tiny-llama byte-level BPE tokenizer (vocab 512), seed-deterministic, fp32.
Data: synthetic plain text (no chat template): DPO pairs, SFT prompt/response pairs and
GRPO prompts; the GRPO reward is the share of a response made of the letter "e" (alignflow's
`rule:target:e`, re-stated for TRL and the floor).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

WORDS = ["the", "cat", "sat", "on", "a", "mat", "while", "two", "dogs", "ran", "far", "into",
         "green", "hills", "and", "seven", "birds", "sang", "old", "songs", "of", "rain", "sun",
         "wind", "snow", "light", "dark", "river", "stone", "tree"]
TARGET = "e"
# Same settings on every side: one thread per process, the glibc malloc settings of
# DESIGN.md, no tokenizer thread pool, fp32, no gradient checkpointing.
ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
       "MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824",
       "ALIGNFLOW_RAY_POOL": "1", "TRANSFORMERS_VERBOSITY": "error"}


@dataclass(frozen=True)
class Work:
    """One benchmark's sizes; every side reads these."""

    examples: int = 128       # DPO pairs / SFT examples
    batch: int = 8            # examples per optimizer step (no accumulation)
    max_len: int = 256
    words: int = 24           # words per synthetic prompt / response
    lr: float = 1e-5
    beta: float = 0.1
    prompts: int = 64         # GRPO: prompts per iteration
    samples: int = 4          # GRPO: responses per prompt
    new_tokens: int = 64      # GRPO: response length cap
    rl_batch: int = 256       # GRPO: samples per optimizer step: one step per generation,
    # so no side needs a forward pass for π_old (TRL makes one when a generation spans steps)
    rl_micro: int = 16        # GRPO: samples per micro-batch

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Work:
        return cls(**json.loads(text))


# What every side does alike, printed with the results (issue 46: a β of 0.01 on one side
# only had added a reference model and its forward pass, 12-20% of the loop, to alignflow).
SAME_WORK = {
    "dpo": "β {beta} on every side, sigmoid loss on summed response log-probs given the "
           "prompt (alignflow data.prompt_key=prompt); one reference "
           "forward pass per pair (alignflow's reference task, TRL's ref_model, the floor's "
           "ref model), one policy forward + backward per pair",
    "sft": "loss on response tokens only, one token mean per optimizer step; one forward + "
           "backward per example",
    "grpo": "β 0 on every side (no reference model, no reference pass: alignflow "
            "algo.kl.init_coef=0, TRL beta=0); PPO-clip against the sampler's log-probs, one "
            "optimizer step per generation ({rl_batch} samples, micro-batches of {rl_micro}), "
            "token losses summed and divided by the step's tokens (alignflow token-mean, TRL "
            "loss_type=dapo); per sample: one generation, one forward + backward",
}


def tiny() -> Work:
    """The CPU tiny mode's work (the test's): seconds per side."""
    return Work(examples=8, batch=4, max_len=64, words=6, prompts=4, samples=2, new_tokens=8,
                rl_batch=8, rl_micro=4)


def same_work(kind: str, work: Work) -> str:
    return SAME_WORK[kind].format(**asdict(work))


def reward(completion: str) -> float:
    """The GRPO reward on every side (alignflow's `target_fraction(response, "e")`)."""
    if not completion:
        return 0.0
    return min(1.0, completion.count(TARGET) * len(TARGET) / len(completion))


def build_model(folder: Path, model: str = "bench") -> Path:
    """The benchmark model folder (built once; same bytes every time): `bench`, the 5.28M
    Llama below; `tiny`, the offline tiny Llama; else a zoo name (`smollm2-135m`) or a path."""
    if model != "bench":
        from alignflow.tasks.zoo.registry import resolve_model

        return Path(resolve_model("tiny-llama" if model == "tiny" else model))
    if (folder / "config.json").exists():
        return folder
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from alignflow.tasks.zoo.registry import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model("tiny-llama"))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=256, intermediate_size=704,
                      num_hidden_layers=7, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=1024, tie_word_embeddings=True,
                      bos_token_id=None, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    model = LlamaForCausalLM(cfg)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def write_data(folder: Path, work: Work) -> dict[str, Path]:
    """dpo.jsonl (prompt, chosen, rejected), sft.jsonl (input, output), grpo.jsonl (prompt)."""
    rng = random.Random(0)
    pairs = [{"prompt": _text(rng, work.words), "chosen": " " + _text(rng, work.words),
              "rejected": " " + _text(rng, work.words)} for _ in range(work.examples)]
    rows = {
        "dpo": pairs,
        "sft": [{"input": p["prompt"], "output": p["chosen"]} for p in pairs],
        "grpo": [{"prompt": f"Question {i}: {_text(rng, 12)}. Answer:"}
                 for i in range(work.prompts)],
    }
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for kind, items in rows.items():
        paths[kind] = folder / f"{kind}.jsonl"
        paths[kind].write_text("".join(json.dumps(r) + "\n" for r in items))
    return paths
