"""The trained model as a plain HF folder under the run (`runs/<run>/final/model`): a causal
LM, or for reward models an `AutoModelForSequenceClassification` folder that the RL flows
take as `rewards.sources=<folder>`."""

from __future__ import annotations

import tempfile
from pathlib import Path

from alignflow.artifacts.scope import current_scope


def export_model(host) -> dict[str, str | int]:
    """`save_pretrained` (weights + tokenizer) into the store; returns the folder."""
    scope = current_scope()
    rel = f"runs/{scope.run_id}/final/model"
    with tempfile.TemporaryDirectory(prefix="alignflow-export-") as tmp:
        host.trainer.save_pretrained(tmp, host.tokenizer)
        files = sorted(p for p in Path(tmp).iterdir() if p.is_file())
        for path in files:
            scope.store.fs.put_file(str(path), scope.store.path(f"{rel}/{path.name}"))
    return {"path": rel, "files": len(files), "step": host.trainer.global_step}
