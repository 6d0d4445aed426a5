"""The trained model as a plain HF folder (safetensors + tokenizer) under the run, so it
loads with `from_pretrained` and serves as the next stage's model: a causal LM, or for
reward models an `AutoModelForSequenceClassification` folder that the RL flows take as
`reward.sources=<folder>` or `reward.model_name_or_path`. A LoRA run exports peft's adapter
folder (`alignflow export RUN --merge-lora --out DIR` merges it into a plain HF folder).
With `train.enable_ema` the policy's export holds its moving average (as OpenRLHF saves it)."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from alignflow.artifacts.scope import current_scope
from alignflow.tasks.steps.host_api import Trained


def export_model(host: Trained, folder: str = "actor", role: str | None = None
                 ) -> dict[str, str | int]:
    """`save_pretrained` of the host's trained model (or of its trained `role`: the PPO
    critic, OpenRLHF's `--save_value_network`) into `runs/<run_id>/final/<folder>` in the
    store; returns the path."""
    scope = current_scope()
    trainer = host.trainer if role is None else getattr(host, role)
    rel = f"runs/{scope.run_id}/final/{folder}"
    ema = getattr(host, "ema", None) if role is None else None  # the policy's, when kept
    if ema is not None:  # a checkpoint still being written reads the weights the EMA swaps
        getattr(trainer, "settle", lambda: None)()
    with tempfile.TemporaryDirectory(prefix="alignflow-export-") as tmp, \
            ema.applied(trainer.model) if ema is not None else contextlib.nullcontext():
        trainer.save_pretrained(tmp, host.tokenizer)  # collective under ZeRO-3
        files = sorted(p for p in Path(tmp).iterdir() if p.is_file())
        for path in files if scope.is_lead else ():  # never through a link in the store
            scope.store.put_file(str(path), f"{rel}/{path.name}")
    return {"path": rel, "files": len(files), "step": trainer.global_step,
            "policy_version": getattr(host, "policy_version", trainer.global_step)}
