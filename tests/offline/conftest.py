"""Shared fixtures of the offline flow tests: synthetic data the tiny model learns fast,
and a helper that runs a built-in flow inline."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def addition_rows(n: int, seed: int) -> list[dict]:
    """"Q: a+b=" prompts; chosen = the right sum + " ok", rejected = a wrong sum + " no"."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(0, 49), rng.randint(0, 49)
        wrong = a + b + rng.choice([-3, -2, -1, 1, 2, 3])
        rows.append({"prompt": f"Q: {a}+{b}=", "chosen": f"{a + b} ok",
                     "rejected": f"{wrong} no", "input": f"What is {a}+{b}?",
                     "output": f"{a}+{b}={a + b}. ok", "score": rng.choice([1, 2, 3])})
    return rows


@pytest.fixture(scope="session")
def pairs_file(tmp_path_factory) -> Path:
    """96 synthetic rows (pairs + SFT columns + a score column)."""
    return _write_jsonl(tmp_path_factory.mktemp("offline") / "pairs.jsonl",
                        addition_rows(96, seed=0))


@pytest.fixture(scope="session")
def prm_file(tmp_path_factory) -> Path:
    """PRM rows: steps end in the placeholder '#', labelled '+' (even result) or '-'."""
    rng = random.Random(1)
    rows = []
    for _ in range(64):
        steps = [rng.randint(0, 99) for _ in range(3)]
        text = " ".join(f"step {s} #" for s in steps)
        rows.append({"input": text, "value": ["+" if s % 2 == 0 else "-" for s in steps]})
    return _write_jsonl(tmp_path_factory.mktemp("offline") / "prm.jsonl", rows)


@pytest.fixture(scope="session")
def base_sets(tiny_model_dir) -> list[str]:
    """Tiny model, one thread, fast schedule, the synthetic rows' columns in the chat template
    (OpenRLHF's defaults are sized for GPUs and name no columns); callers add data and
    objective settings."""
    return [f"model.model_name_or_path={tiny_model_dir}", "num_threads=1", "lr_warmup_ratio=0",
            "train.batch_size=8", "train.micro_batch_size=4", "train.max_epochs=1",
            "data.output_key=output", "data.prompt_key=prompt", "data.input_template=null",
            "data.apply_chat_template=true"]


def run_flow(name: str, sets: list[str], store, *, run_id: str | None = None,
             executor: str = "inline", seed: int = 1):
    flow, cfg_cls = load_flow(name)
    cfg = load_config(cfg_cls, sets=sets)
    return api.run(flow, cfg, store=str(store), executor=executor, seed=seed, run_id=run_id)
