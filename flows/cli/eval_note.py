"""The progress line's note for a finished evaluation: `iter-0004/eval_score done in 3.1s,
eval correct 0.42 (arith-2), pass1 0.40` — the held-out score where the person watching
sees the run, without a query."""

from __future__ import annotations

from typing import Any


def eval_note(output: Any) -> str:
    """`, eval correct 0.42, pass1 0.40` from an eval step's record (`eval/*` metrics), as
    the journal keeps it (`{"__type__": ..., "fields": {"metrics": ...}}`) or plain."""
    record = output.get("fields", output) if isinstance(output, dict) else None  # journalled
    metrics = record.get("metrics") if isinstance(record, dict) else None
    if not isinstance(metrics, dict) or not any(str(k).startswith("eval/") for k in metrics):
        return ""
    parts = []
    if isinstance(metrics.get("eval/correct"), int | float):
        parts.append(f"eval correct {metrics['eval/correct']:.3f}")
    passes = sorted(k for k in metrics if k.startswith("eval/") and "/pass" in k)
    parts += [f"{k.split('/', 1)[1]} {metrics[k]:.3f}" for k in passes[:3]
              if isinstance(metrics[k], int | float)]
    return ", " + ", ".join(parts) if parts else ""
