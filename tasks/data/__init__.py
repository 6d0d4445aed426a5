"""Offline datasets by name, local files and cached hub sets; prompt, pair and SFT prep.

Names are imported on first use, so importing one torch-free module of the package
(a config section, a name list) imports no torch."""

from __future__ import annotations

import importlib

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


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
