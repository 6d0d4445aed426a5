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
    "sft": ("alignflow.flows.sft:sft", "alignflow.flows.offline_config:SFTConfig"),
    "csft": ("alignflow.flows.sft:csft", "alignflow.flows.offline_config:CSFTConfig"),
    "rm": ("alignflow.flows.rm:rm", "alignflow.flows.offline_config:RMConfig"),
    "dpo": ("alignflow.flows.dpo:dpo", "alignflow.flows.offline_config:DPOConfig"),
    "kto": ("alignflow.flows.kto:kto", "alignflow.flows.offline_config:KTOConfig"),
    "distill": ("alignflow.flows.distill:distill", "alignflow.flows.offline_config:DistillConfig"),
    "prm": ("alignflow.flows.prm:prm", "alignflow.flows.offline_config:PRMConfig"),
    "rejection_sampling": ("alignflow.flows.rejection_sampling:rejection_sampling",
                           "alignflow.flows.loops_config:RejectionSamplingConfig"),
    "iterative_dpo": ("alignflow.flows.iterative_dpo:iterative_dpo",
                      "alignflow.flows.loops_config:IterativeDPOConfig"),
}


def register(name: str, target: str, config: str | None = None) -> None:
    """Make `alignflow run NAME` run `target` ("module:function") with config class `config`."""
    BUILTIN[name] = (target, config)


def names() -> list[str]:
    return sorted(BUILTIN)
