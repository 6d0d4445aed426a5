"""Offline models: the tiny test Llama, SmolLM2-135M from its GGUF, and name resolution."""

from alignflow.tasks.models.registry import known_models, models_dir, prepare_model, resolve_model
from alignflow.tasks.models.tiny import build_tiny_model, build_tiny_reward_model

__all__ = [
    "build_tiny_model",
    "build_tiny_reward_model",
    "known_models",
    "models_dir",
    "prepare_model",
    "resolve_model",
]
