"""Offline models: the tiny test Llama, SmolLM2-135M from its GGUF, and name resolution.

Names are imported lazily so `alignflow.tasks.zoo.registry` stays free of torch.
"""

from __future__ import annotations

from alignflow.lazy import exports

_EXPORTS = {
    "build_tiny_model": "tiny",
    "build_tiny_reward_model": "tiny",
    "prepare_smollm2": "smollm2",
    "known_models": "registry",
    "models_dir": "registry",
    "prepare_model": "registry",
    "resolve_model": "registry",
}
__all__ = sorted(_EXPORTS)

__getattr__ = exports(__name__, _EXPORTS)
