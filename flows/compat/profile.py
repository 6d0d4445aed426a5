"""The one rule for defaults: flags speak OpenRLHF.

A run whose command line names a key by one of OpenRLHF's own flags (`--n_samples_per_prompt`
or `--rollout.n_samples_per_prompt`) takes OpenRLHF's default for every key it leaves unset
that OpenRLHF has too — its version's defaults (0.11 for dotted flags, 0.9.10 as soon as one
flag exists only in the flat CLI; KTO and PRM: 0.9.5), batch sizes included, since they set
step counts and the LR schedule. A run configured by YAML and `--set` keeps alignflow's
defaults. `--defaults openrlhf|alignflow` forces either. What alignflow cannot reproduce is
said out loud, one line each (`notes`).

Keys OpenRLHF has but whose default is not a meaning are left to alignflow: places (model
paths, datasets, output folders), placement and precision (hardware), loggers, and the
advantage estimator (the flow's name says it: `alignflow run grpo`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from alignflow.errors import ConfigError
from alignflow.flows.compat import reference
from alignflow.flows.config.lookup import value_at
from alignflow.flows.config.sources import Keys
from alignflow.flows.config.values import coerce

KEEP_ALIGNFLOW = ("actor.model_name_or_path", "critic.model_name_or_path", "model.",
                  "ref.model_name_or_path", "reward.model_name_or_path", "reward.remote_url",
                  "data.prompt_dataset", "data.dataset", "eval.dataset", "ckpt.output_dir",
                  "ckpt.path", "logger.", "ds.", "vllm.", "train.colocate",
                  *(f"{role}.num_{n}" for role in ("actor", "critic", "ref", "reward")
                    for n in ("nodes", "gpus_per_node")),
                  "algo.advantage.estimator", "teacher.")
NOT_KEPT = ("model.beta", "model.ipo_enable", "model.label_smoothing", "model.loss_type",
            "model.desirable_loss_weight", "model.undesirable_loss_weight",
            "model.pretrain_mode_enable")  # loss knobs under model.*: meanings, not places


@dataclass(frozen=True)
class Profile:
    """Which defaults a run takes: `script` and `version` are OpenRLHF's, or None."""

    script: str | None
    version: str | None
    reason: str

    @property
    def label(self) -> str:
        return f"OpenRLHF {self.version} default ({self.script})" if self.script else "default"


def choose(flow: str, flags: list[str], forced: str = "auto") -> Profile:
    """The profile of `alignflow run FLOW ... flags` (raw argv tokens after FLOW)."""
    script = reference.SCRIPT_OF.get(flow)
    given = [t[2:].split("=", 1)[0].replace("-", "_") for t in flags if t.startswith("--")]
    ours = [n for n in given if script and n in reference.names(script)]
    if forced == "alignflow" or script is None or (forced == "auto" and not ours):
        why = "no OpenRLHF flag given" if script else f"{flow} has no OpenRLHF counterpart"
        return Profile(None, None, "forced" if forced == "alignflow" else why)
    dotted, flat = reference.versions(script)
    old = [n for n in ours if n not in reference.names(script, dotted)]
    version = flat if old else dotted
    cause = f"--{(old or ours)[0]}" if ours else "--defaults openrlhf"
    return Profile(script, version, f"{cause} is OpenRLHF's flag")


def _kept(key: str) -> bool:
    return key.startswith(KEEP_ALIGNFLOW) and key not in NOT_KEPT


def base_overrides(profile: Profile, cls: type) -> dict[str, tuple[Any, str]]:
    """OpenRLHF's defaults as the lowest config source: key -> (value, origin)."""
    if profile.script is None:
        return {}
    keys, out = Keys.of(cls), {}
    for flag in reference.script_flags(profile.script, profile.version):
        for key in keys.canonical(flag.name):
            if key not in keys.paths or _kept(key) or flag.default.startswith("("):
                continue
            with contextlib.suppress(ConfigError):  # e.g. None for a key that needs a value
                out[key] = (coerce(_value(flag), keys.paths[key], key), profile.label)
    return out


DATASETS = ("data.prompt_dataset", "data.dataset")
OF_DATASET = ("data.prompt_split", "data.dataset_split", "data.input_key", "data.output_key",
              "data.label_key", "data.prompt_key", "data.chosen_key", "data.rejected_key")


def own_dataset_keys(profile: Profile, base: Mapping[str, tuple[Any, str]],
                     origins: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """`base` without OpenRLHF's split and column-name defaults when the dataset is
    alignflow's default (kept, as every place is): OpenRLHF has no default dataset, and
    those values describe the dataset, so they stay the ones that fit alignflow's."""
    if any(key in origins for key in DATASETS):
        return dict(base)
    return {key: value for key, value in base.items()
            if key not in OF_DATASET or origins.get(key) != profile.label}


def legacy_lengths(flags: list[str]) -> dict[str, tuple[Any, str]]:
    """OpenRLHF before v0.9.8 had `--prompt_max_len` (1024) and `--generate_max_len` (1024)
    and no total: a script using them means data.max_len = their sum (prompts are cut to
    prompt_max_len, as max_len - max_new_tokens does)."""
    given = {}
    for i, token in enumerate(flags):
        name = token[2:].split("=", 1)[0]
        if name in ("prompt_max_len", "generate_max_len", "max_len", "data.max_len"):
            given[name] = token.split("=", 1)[1] if "=" in token else \
                (flags[i + 1] if i + 1 < len(flags) else "")
    if "max_len" in given or "data.max_len" in given or not (
            {"prompt_max_len", "generate_max_len"} & set(given)):
        return {}
    try:
        total = int(given.get("prompt_max_len", 1024)) + int(given.get("generate_max_len", 1024))
    except ValueError:
        return {}  # the loader reports the bad number
    return {"data.max_len": (total, "OpenRLHF < 0.9.8: prompt_max_len + generate_max_len")}


def _value(flag: reference.Flag) -> Any:
    text = flag.default
    if flag.is_bool:
        return text == "True"
    if text == "None":
        return None
    if "x2" in flag.type or flag.type.endswith("list"):
        return text.split()
    return str(int(float(text))) if flag.type == "int" else text


def settle(profile: Profile, cfg: Any, origins: Mapping[str, str]) -> Any:
    """OpenRLHF ignores its default input_template when a chat template is used: so does a
    run on its defaults (a template the user gave is kept, and said out loud)."""
    data = value_at(cfg, "data")
    if profile.script and data is not None and data.apply_chat_template and \
            data.input_template and origins.get("data.input_template") == profile.label:
        return dataclasses.replace(cfg, data=dataclasses.replace(data, input_template=None))
    return cfg


def run_seed(profile: Profile, given: int | None) -> int:
    """The run seed: `--seed` / `--train.seed`, else OpenRLHF's 42 or alignflow's 0."""
    if given is not None:
        return given
    return 42 if profile.script else 0


def differing(profile: Profile, cls: type, base: Mapping[str, tuple[Any, str]]) -> list[str]:
    """Keys whose OpenRLHF default differs from alignflow's (for `--dry-run`)."""
    from alignflow.flows.config.build import resolve_config

    plain = resolve_config(cls).config
    return [k for k, (v, _o) in base.items() if _get(plain, k) != v]


def _get(cfg: Any, key: str) -> Any:
    return value_at(cfg, key)
