"""Built-in flows by name: name -> ("module:function", "module:ConfigClass" or None).

Registering a flow is one line, e.g. in the module that defines it or here:
`register("grpo", "alignflow.flows.grpo:grpo", "alignflow.flows.grpo:GRPOConfig")`.
Entries are strings so `alignflow --help` and `alignflow ls` import nothing heavy.
"""

from __future__ import annotations

BUILTIN: dict[str, tuple[str, str | None]] = {
    "grpo": ("alignflow.flows.grpo:grpo", "alignflow.flows.rl_config:RLConfig"),
    "dr_grpo": ("alignflow.flows.grpo:grpo", "alignflow.flows.rl_config:DrGRPOConfig"),
    "rloo": ("alignflow.flows.grpo:grpo", "alignflow.flows.rl_config:RLOOConfig"),
    "reinforce_pp": ("alignflow.flows.grpo:grpo", "alignflow.flows.rl_config:ReinforceConfig"),
    "reinforce_pp_baseline": ("alignflow.flows.grpo:grpo",
                              "alignflow.flows.rl_config:ReinforceBaselineConfig"),
    "ppo": ("alignflow.flows.ppo:ppo", "alignflow.flows.rl_config:PPOConfig"),
}


def register(name: str, target: str, config: str | None = None) -> None:
    """Make `alignflow run NAME` run `target` ("module:function") with config class `config`."""
    BUILTIN[name] = (target, config)


def names() -> list[str]:
    return sorted(BUILTIN)
