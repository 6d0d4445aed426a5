"""Reward specs → sources, and the score step's reward config.

A spec is `[name=]<source>`: `rule:gsm8k`, `rule:format[:boxed]`, `rule:target:<text>`
(rules.py); a `.py` file with `reward_func` (OpenRLHF passes these as `--remote_rm_url`);
an `http(s)://` URL (remote RM); or a Hugging Face model folder (`--reward_pretrain`).
Without `name=`, a source is named after the rule, file stem, `remote` or folder name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from alignflow.errors import ConfigError, require

if TYPE_CHECKING:  # the config is read by the driver, which imports no torch
    from alignflow.tasks.rewards.base import RewardSource
    from alignflow.tasks.rewards.combine import CombinedReward

_NAMED = re.compile(r"^([A-Za-z_][\w.-]*)=(.+)$")


DEFAULT_SOURCE = "rule:gsm8k"
SpecKind = Literal["rule", "remote", "code", "model"]


@dataclass(frozen=True, kw_only=True)
class RewardConfig:
    """Where rewards come from (OpenRLHF 0.11's `reward.*`), combined by `weights`.

    model_name_or_path: a reward model (HF sequence classifier; folder or offline name)
    remote_url: an http(s) reward server or a .py file with reward_func (comma-separated: several)
    sources: more specs: rule:gsm8k, rule:format[:boxed], rule:target:<text>, rule:countdown, .py files, URLs, model folders, each optionally name=spec
    weights: one per source in the order sources, model, remote URLs (default 1.0 each)
    normalize_enable: standardise a reward model's scores with the mean/std in its config.json
    offload: park reward models on disk between score steps
    remote_budget: seconds one batch may spend on a remote reward server, all tries included
    func_timeout: seconds one call of a Python reward function may take (it runs in a child process, stopped past this)
    """

    model_name_or_path: str | None = None
    remote_url: str | None = None
    sources: tuple[str, ...] = ()
    weights: tuple[float, ...] | None = None
    micro_batch: int = 8
    remote_timeout: float = 60.0
    remote_retries: int = 3
    remote_budget: float = 300.0
    func_timeout: float = 300.0
    normalize_enable: bool = False
    offload: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(self.sources))
        specs = self.specs
        if self.weights is not None:
            object.__setattr__(self, "weights", tuple(self.weights))
            require(len(self.weights) == len(specs), "weights",
                    f"one weight per reward source ({len(specs)}: {', '.join(specs)})",
                    self.weights)
        require(self.micro_batch >= 1, "micro_batch", "an integer >= 1", self.micro_batch)
        require(math.isfinite(self.remote_timeout) and self.remote_timeout > 0,
                "remote_timeout", "finite seconds > 0", self.remote_timeout)
        require(self.remote_retries >= 0, "remote_retries", "an integer >= 0",
                self.remote_retries)
        require(0 < self.func_timeout < float("inf"), "func_timeout",
                "finite seconds > 0 (the time one call of a Python reward function may take)",
                self.func_timeout)
        require(0 < self.remote_budget < float("inf"), "remote_budget",
                "seconds > 0 (the time one batch may spend on a remote reward server)",
                self.remote_budget)

    @property
    def specs(self) -> tuple[str, ...]:
        """Every source spec: `sources`, then the reward model, then the remote reward
        (`rule:gsm8k` when none is given). As OpenRLHF reads `remote_url`: a `.py` first
        item is the reward function (the other items are not used); several URLs are
        replicas of one server (one `remote=u1,u2` spec)."""
        found = list(self.sources)
        if self.model_name_or_path:
            found.append(self.model_name_or_path)
        urls = self.remote_urls
        if urls and urls[0].endswith(".py"):
            found.append(urls[0])
        elif urls:
            found.append(urls[0] if len(urls) == 1 else "remote=" + ",".join(urls))
        return tuple(found) or (DEFAULT_SOURCE,)

    @property
    def holds_model(self) -> bool:
        """Whether a source is a reward model (rules, code and remote servers hold none)."""
        return any(spec_kind(split_name(s)[1]) == "model" for s in self.specs)

    @property
    def remote_urls(self) -> list[str]:
        return [u.strip() for u in (self.remote_url or "").split(",") if u.strip()]

    def references(self) -> list[tuple[str, str, str]]:
        """(key, kind, value) of the code files and servers the specs name, read by the
        same parser as `build_source` (`flows/config/refs.py`)."""
        found = [ref for i, spec in enumerate(self.sources)
                 for ref in spec_references(spec, f"sources[{i}]")]
        urls = self.remote_urls
        if urls and urls[0].endswith(".py"):
            found += spec_references(urls[0], "remote_url")
        else:
            found += [r for url in urls for r in spec_references(url, "remote_url")]
        return found


def spec_kind(target: str) -> SpecKind:
    """What a spec (without `name=`) names. `build_source` builds by this answer and the
    trust check of a stored run reads it, so the two never disagree on what is code."""
    if target.startswith("rule:"):
        return "rule"
    if target.startswith(("http://", "https://")):
        return "remote"
    return "code" if target.endswith(".py") else "model"


def spec_references(spec: str, key: str) -> list[tuple[str, str, str]]:
    """(key, kind, value) of what one spec names outside alignflow: a code file or URLs."""
    target = split_name(spec)[1]
    kind = spec_kind(target)
    if kind == "code":
        return [(key, "code", target)]
    if kind == "remote":
        return [(key, "url", url) for url in target.split(",")]
    return []


def split_name(spec: str) -> tuple[str, str]:
    """'acc=rule:gsm8k' → ('acc', 'rule:gsm8k'); 'rule:gsm8k' → ('gsm8k', 'rule:gsm8k')."""
    match = _NAMED.match(spec)
    if match:
        return match.group(1), match.group(2)
    if spec.startswith("rule:"):
        return spec.split(":")[1], spec
    if spec.startswith(("http://", "https://")):
        return "remote", spec
    return Path(spec).stem or spec, spec


def build_source(spec: str, cfg: RewardConfig | None = None) -> RewardSource:
    """One spec (without `name=`) → its RewardSource."""
    cfg = cfg or RewardConfig(sources=(spec,))
    kind = spec_kind(spec)
    if kind == "rule":
        from alignflow.tasks.rewards.rules import rule_source

        return rule_source(spec)
    if kind == "remote":
        from alignflow.tasks.rewards.remote import RemoteRewardModel
        from alignflow.tasks.rewards.replicas import Replicas

        servers = [RemoteRewardModel(url=u, timeout=cfg.remote_timeout, retries=cfg.remote_retries,
                                     budget=cfg.remote_budget, micro_batch=cfg.micro_batch)
                   for u in spec.split(",")]
        return servers[0] if len(servers) == 1 else Replicas(servers)
    if kind == "code":
        from alignflow.tasks.rewards.python_func import PythonRewardFunc

        return PythonRewardFunc(spec, timeout=cfg.func_timeout)
    from alignflow.tasks.rewards.model_rm import ModelRewardModel

    return ModelRewardModel(model_folder(spec), micro_batch=cfg.micro_batch,
                            normalize=cfg.normalize_enable)


def model_folder(spec: str) -> str:
    """A reward model's folder: a local folder, an offline name (`tiny-llama-rm`, prepared
    on first use, as `model_name_or_path` is), an `s3://` URL or an HF Hub id (fetched)."""
    if Path(spec).is_dir():
        return spec
    from alignflow.artifacts.sources import is_url
    from alignflow.tasks.zoo.registry import known_models, resolve_model

    if spec in known_models() or is_url(spec) or re.fullmatch(r"[\w.-]+/[\w.-]+", spec):
        try:
            return resolve_model(spec)
        except ConfigError as exc:
            raise ConfigError(f"reward source {spec!r}: {exc}") from None
    from alignflow.tasks.rewards.spec_forms import FORMS, foreign_hint

    raise ConfigError(foreign_hint(spec) or f"reward source {spec!r}: expected {FORMS} "
                      f"(known model names: {', '.join(known_models())})")


def build_reward(cfg: RewardConfig) -> CombinedReward:
    """All of `cfg.specs`, combined with `cfg.weights`; names must be unique."""
    named = [split_name(s) for s in cfg.specs]
    names = [n for n, _ in named]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"reward sources share the name(s) {dupes}; give each a name "
                          f"with 'name=<spec>'")
    sources = {name: build_source(spec, cfg) for name, spec in named}
    weights = dict(zip(names, cfg.weights, strict=True)) if cfg.weights else None
    from alignflow.tasks.rewards.combine import CombinedReward

    return CombinedReward(sources, weights)
