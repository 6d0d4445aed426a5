"""A campaign's config (one YAML file): the round flow and its config, the growing input,
the schedule, the promotion gate and the retention of round checkpoints.

    name: gsm8k-nightly
    flow: iterative_dpo            # built-in name or path/to/flow.py:function
    config: {rounds: 1, ...}       # the round flow's config (as its --config YAML)
    inputs: {source: ./incoming, pattern: "*.jsonl"}
    schedule: {every: 6h}          # or {cron: "0 3 * * *", timezone: Europe/Paris}
    gate: {prompts: alignflow:gsm8k, max_samples: 32, metric: score/gsm8k/correct}
    retention: {keep_rounds: 2}
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from alignflow.artifacts.metric_names import canonical
from alignflow.errors import ConfigError, invalid, require
from alignflow.flows.campaign.schedule import ScheduleConfig
from alignflow.tasks.rewards.answers import RULE_KEYS, check_rule
from alignflow.tasks.rewards.registry import spec_kind, spec_references, split_name
from alignflow.tasks.steps.rollout_config import METRICS as GENERATE_METRICS

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


@dataclass(frozen=True, kw_only=True)
class InputsConfig:
    """A folder or `s3://` prefix that grows; each new file feeds exactly one round.

    source: local folder or s3://bucket/prefix (write files whole: temp name, then rename)
    pattern: file-name glob of the files that count (e.g. *.jsonl)
    key: the round config key (or flag name) that gets the round's new files, comma-separated
    min_files: a due round with fewer new files is skipped (status no_input); 0: it trains
      on the round config's own data when no file is new
    """

    source: str | None = None
    pattern: str = "*"
    key: str = "prompt_data"
    min_files: int = 1

    def __post_init__(self) -> None:
        require(self.min_files >= 0, "min_files", "an integer >= 0", self.min_files)


@dataclass(frozen=True, kw_only=True)
class GateConfig:
    """Promotion gate: a round's policy replaces the current one only if it beats it on a
    fixed eval prompt set by `metric` (generations and scores are committed to the store).

    prompts: dataset spec of the fixed eval prompts (alignflow:gsm8k, a local file, ...)
    metric: a metric of the eval: reward_mean, score/NAME (a source's reward), score/NAME/KEY (its parts, e.g. score/gsm8k/correct), log/NAME/KEY, response_len_mean, ...
    mode: max (higher is better) or min
    min_improvement: the candidate must beat the current policy by more than this
    """

    prompts: str = "alignflow:gsm8k"
    max_samples: int | None = 32
    input_key: str = "question"
    label_key: str | None = "label"
    input_template: str | None = None
    apply_chat_template: bool = True
    rewards: tuple[str, ...] = ("rule:gsm8k",)
    metric: str = "reward_mean"
    mode: Literal["max", "min"] = "max"
    min_improvement: float = 0.0
    n_samples_per_prompt: int = 1
    max_new_tokens: int = 128
    temperature: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "rewards", tuple(self.rewards))
        if not self.rewards:
            raise ConfigError("gate.rewards: expected at least one reward source")
        require(self.max_samples is None or self.max_samples >= 1, "max_samples",
                "an integer >= 1 or null", self.max_samples)
        for key in ("n_samples_per_prompt", "max_new_tokens"):
            require(getattr(self, key) >= 1, key, "an integer >= 1", getattr(self, key))
        require(math.isfinite(self.min_improvement), "min_improvement", "a finite number",
                self.min_improvement)
        require(math.isfinite(self.temperature) and self.temperature >= 0, "temperature",
                "a finite number >= 0", self.temperature)
        names, open_ = self.metrics()
        known = {canonical(n) for n in names}  # as the step names it, or as W&B does
        if canonical(self.metric) not in known and not canonical(self.metric).startswith(
                tuple(canonical(p) for p in open_)):
            own = f" (or a key of {', '.join(p + 'KEY' for p in open_)})" if open_ else ""
            raise invalid("metric", f"{self.metric!r} is not a metric of the gate's eval; "
                          f"expected one of {', '.join(names)}{own}")

    def metrics(self) -> tuple[list[str], tuple[str, ...]]:
        """(the metrics every eval has, prefixes of those a Python or remote source names
        itself): the generate step's, the rewards' mean and spread, each source's reward
        and the parts a rule or a reward model scores."""
        names, open_ = [*GENERATE_METRICS, "reward_mean", "reward_std"], []
        for spec in self.rewards:
            name, target = split_name(spec)
            names.append(f"score/{name}")
            kind = spec_kind(target)
            if kind == "rule":
                scores, logs = RULE_KEYS[check_rule(target)[0]]
                names += [f"score/{name}/{k}" for k in scores]
                names += [f"log/{name}/{k}" for k in logs]
            elif kind == "model":
                names.append(f"score/{name}/raw")
            else:
                open_ += [f"score/{name}/", f"log/{name}/"]
        return names, tuple(open_)

    def references(self) -> list[tuple[str, str, str]]:
        """The code files and servers the gate's reward specs name (`flows/config/refs.py`)."""
        return [ref for i, spec in enumerate(self.rewards)
                for ref in spec_references(spec, f"rewards[{i}]")]


@dataclass(frozen=True, kw_only=True)
class RetentionConfig:
    """keep_rounds: rounds whose checkpoints are kept (older ones are deleted; the current
    policy's model folder is never deleted)"""

    keep_rounds: int = 2

    def __post_init__(self) -> None:
        require(self.keep_rounds >= 1, "keep_rounds", "an integer >= 1", self.keep_rounds)


@dataclass(frozen=True, kw_only=True)
class CampaignConfig:
    """A scheduled, gated series of training rounds (see the module docstring).

    name: the campaign's name; its run id is campaign-<name>
    flow: the round flow: a built-in name or path/to/flow.py:function
    config: the round flow's config, as a mapping (the keys of its --config YAML)
    policy_key: the round config key (or flag name) that gets the current policy's folder
    max_rounds: stop after this many due times (null: run until stopped)
    executor: where round runs execute (ray, or inline for debugging)
    """

    # what the gate's first tasks fix: its prompts, and what every policy's eval measured
    # (a resumed campaign follows any other change: `flows/control/reconfigure.py`)
    RESUME_FIXED: ClassVar[dict[str, str]] = {
        **{f"gate.{k}": "gate/prompts" for k in (
            "prompts", "max_samples", "input_key", "label_key", "input_template",
            "apply_chat_template")},
        **{f"gate.{k}": "gate/eval-initial" for k in (
            "rewards", "n_samples_per_prompt", "max_new_tokens", "temperature")}}
    name: str
    flow: str = field(metadata={"refers": "flow"})
    config: dict[str, Any] = field(default_factory=dict)
    policy_key: str = "pretrain"
    inputs: InputsConfig = field(default_factory=InputsConfig)
    schedule: ScheduleConfig
    gate: GateConfig = field(default_factory=GateConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    max_rounds: int | None = None
    executor: Literal["ray", "inline"] = "ray"

    def __post_init__(self) -> None:
        require(self.max_rounds is None or self.max_rounds >= 1, "max_rounds",
                "an integer >= 1 or null", self.max_rounds)
        if not _NAME.match(self.name):
            raise ConfigError(f"name={self.name!r}: expected lower-case letters, digits, '-' "
                              "and '_' (at most 63), starting with a letter or digit")

    @property
    def run_id(self) -> str:
        return campaign_run_id(self.name)


def campaign_run_id(name: str) -> str:
    return f"campaign-{name}"


def lookup(mapping: dict[str, Any], dotted: str) -> Any:
    """`mapping["a"]["b"]` for "a.b", or a flat "a.b" key; None when absent."""
    if dotted in mapping:
        return mapping[dotted]
    node: Any = mapping
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
