"""Offline datasets by name, local files and cached hub sets; prompt, pair and SFT prep.

Names are imported on first use (`alignflow/lazy.py`)."""

from __future__ import annotations

from alignflow.lazy import exports

_EXPORTS = {
    "load_dataset_spec": "loading",
    "mix_datasets": "loading",
    "NAMED": "named",
    "gsm8k_label": "named",
    "prepare_preferences": "pairs",
    "prepare_sft": "pairs",
    "Prepared": "prompts",
    "prepare_prompts": "prompts",
}
__all__ = sorted(_EXPORTS)

__getattr__ = exports(__name__, _EXPORTS)
