"""The final policy as a plain HF folder (safetensors + tokenizer) under the run, so it
loads with `from_pretrained` and serves as the next stage's model."""

from __future__ import annotations

import tempfile
from pathlib import Path

from alignflow.artifacts.scope import current_scope


def export_model(host, role: str = "actor") -> dict[str, str | int]:
    """`save_pretrained` into `runs/<run_id>/final/<role>` in the store; returns the path."""
    scope = current_scope()
    trainer = host.actor if role == "actor" else host.critic
    rel = f"runs/{scope.run_id}/final/{role}"
    with tempfile.TemporaryDirectory(prefix="alignflow-export-") as tmp:
        trainer.save_pretrained(tmp, host.tokenizer)
        files = sorted(p for p in Path(tmp).iterdir() if p.is_file())
        for path in files:
            scope.store.fs.put_file(str(path), scope.store.path(f"{rel}/{path.name}"))
    return {"path": rel, "files": len(files), "policy_version": host.policy_version}
