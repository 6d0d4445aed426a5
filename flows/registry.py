"""Built-in flows by name: name -> ("module:function", "module:ConfigClass" or None).

Registering a flow is one line, e.g. in the module that defines it or here:
`register("grpo", "alignflow.flows.rl.grpo:grpo", "alignflow.flows.rl.config:RLConfig")`.
Entries are strings so `alignflow --help` and `alignflow ls` import nothing heavy.
"""

from __future__ import annotations

BUILTIN: dict[str, tuple[str, str | None]] = {
    "grpo": ("alignflow.flows.rl.grpo:grpo", "alignflow.flows.rl.config:RLConfig"),
    "dr_grpo": ("alignflow.flows.rl.grpo:grpo", "alignflow.flows.rl.config:DrGRPOConfig"),
    "rloo": ("alignflow.flows.rl.grpo:grpo", "alignflow.flows.rl.config:RLOOConfig"),
    "reinforce_pp": ("alignflow.flows.rl.grpo:grpo", "alignflow.flows.rl.config:ReinforceConfig"),
    "reinforce_pp_baseline": ("alignflow.flows.rl.grpo:grpo",
                              "alignflow.flows.rl.config:ReinforceBaselineConfig"),
    "flash_reinforce": ("alignflow.flows.rl.grpo:grpo",
                        "alignflow.flows.rl.flash_config:FlashReinforceConfig"),
    "on_policy_distill": ("alignflow.flows.rl.distill_online:on_policy_distill",
                          "alignflow.flows.rl.distill_online:OnPolicyDistillConfig"),
    "ppo": ("alignflow.flows.rl.ppo:ppo", "alignflow.flows.rl.config:PPOConfig"),
    "sft": ("alignflow.flows.offline.sft:sft", "alignflow.flows.offline.config:SFTConfig"),
    "csft": ("alignflow.flows.offline.sft:csft", "alignflow.flows.offline.config:CSFTConfig"),
    "rm": ("alignflow.flows.offline.rm:rm", "alignflow.flows.offline.config:RMConfig"),
    "dpo": ("alignflow.flows.offline.dpo:dpo", "alignflow.flows.offline.config:DPOConfig"),
    "kto": ("alignflow.flows.offline.kto:kto", "alignflow.flows.offline.config:KTOConfig"),
    "distill": ("alignflow.flows.offline.distill:distill", "alignflow.flows.offline.config:DistillConfig"),
    "prm": ("alignflow.flows.offline.prm:prm", "alignflow.flows.offline.config:PRMConfig"),
    "rejection_sampling": ("alignflow.flows.loops.rejection_sampling:rejection_sampling",
                           "alignflow.flows.loops.config:RejectionSamplingConfig"),
    "iterative_dpo": ("alignflow.flows.loops.iterative_dpo:iterative_dpo",
                      "alignflow.flows.loops.config:IterativeDPOConfig"),
    "campaign": ("alignflow.flows.campaign.campaign:campaign",
                 "alignflow.flows.campaign.config:CampaignConfig"),
}


def register(name: str, target: str, config: str | None = None) -> None:
    """Make `alignflow run NAME` run `target` ("module:function") with config class `config`."""
    BUILTIN[name] = (target, config)


def names() -> list[str]:
    return sorted(BUILTIN)
