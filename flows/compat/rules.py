"""Where each OpenRLHF flag goes: derived from the reference's renames, not written by hand.

alignflow's keys are OpenRLHF 0.11's dotted names, so a flag's key is the 0.11 flag it was
renamed to (`--init_kl_coef` -> `algo.kl.init_coef`; `--bf16` -> `ds.param_dtype=bf16`,
through `--param_dtype bf16`). A flag of a CLI OpenRLHF removed (train_kd, train_kto,
train_prm, train_ppo) goes where the same flag of a CLI that lived on went. What stays
hand-written is small and checked by tests/fast/test_openrlhf_flags.py:
- `EXTRA`: the few flags that were dropped without a successor but mean something here;
- `MISSING`: why a 0.11 key alignflow does not have is missing (the test fails as soon as
  the key exists, so the reason cannot outlive the gap);
- `INERT`: keys whose every value asks for nothing alignflow does differently.
"""

from __future__ import annotations

import functools
from collections.abc import Container
from dataclasses import dataclass
from typing import Literal

from alignflow.flows.compat import reference

# where a removed CLI's flags are looked up: its successor first, then the living CLIs
SISTER = {"train_ppo": "train_ppo_ray", "train_kd": "train_sft", "train_kto": "train_dpo",
          "train_prm": "train_rm"}
LIVING = ("train_sft", "train_dpo", "train_rm", "train_ppo_ray")
# flags whose meaning is their release's (`era.py`), not a rename
CONVERTED = ("prompt_max_len", "generate_max_len", "vllm_is_truncated_threshold",
             *(f"algo.advantage.is_correction_{k}" for k in ("level", "mode", "gating")))


@dataclass(frozen=True)
class Target:
    """The 0.11 key(s) a flag sets, and the value when the flag is a switch for one."""

    keys: tuple[str, ...]
    value: str | None = None


# Dropped by OpenRLHF without a successor, kept by alignflow under these keys.
EXTRA: dict[str, Target] = {
    "kd_coef": Target(("model.kd_coef",)),
    "teacher_model": Target(("teacher.model_name_or_path",)),
    "desirable_loss_weight": Target(("model.desirable_loss_weight",)),
    "undesirable_loss_weight": Target(("model.undesirable_loss_weight",)),
    "placeholder_token": Target(("data.placeholder_token",)),
    "reward_tokens": Target(("data.reward_tokens",)),
    "pretrain_data": Target(("algo.ptx.pretrain_data",)),
    "pretrain_data_probs": Target(("algo.ptx.pretrain_data_probs",)),
    "pretrain_split": Target(("algo.ptx.pretrain_split",)),
    "ptx_coef": Target(("algo.ptx.ptx_coef",)),
    "teacher_offload": Target(("teacher.offload",)),
    **{name: Target((name,)) for name in ("perf", "actor_init_on_gpu", "disable_trace_cache")},
}

# A flag of OpenRLHF 0.11.2 whose meaning alignflow has under another key.
ELSEWHERE: dict[str, Target] = {
    "actor.loss_agg_mode": Target(("algo.loss_agg",)),
    **{f"{p}muon.no_nesterov": Target((f"{p}muon.nesterov",), "false")  # store_false
       for p in ("", "actor.", "critic.")},
}
# Values of a flag alignflow has that ask for what it lacks: (flag, value) -> why.
REFUSED_VALUES: dict[tuple[str, str], str] = {}

VLM = "vision-language models are not supported"
# 0.11 keys alignflow has no key for: why (a value other than OpenRLHF's default is refused).
MISSING: dict[str, str] = {
    "actor.aux_loss_coef": "the MoE auxiliary loss is not implemented",
    "model.aux_loss_coef": "the MoE auxiliary loss is not implemented",
    **{f"{p}lr_scheduler": "alignflow schedules a warmup then a cosine to min_lr_ratio only"
       for p in ("", "actor.", "critic.")},
    "data.image_key": VLM, "data.max_images_per_prompt": VLM,
    "actor.freeze_visual_encoder": VLM,
    "ds.experts_implementation": "MoE expert kernels are not available",
    "ds.use_liger_kernel": "Liger kernels are not available",
    "ds.value_head_prefix": "alignflow's reward and value heads are named `score`",
    "data.disable_fast_tokenizer": "alignflow uses the fast tokenizer",
    "data.tokenizer_chat_template": "a chat template other than the tokenizer's is not "
                                   "implemented",
    "actor.gradient_checkpointing_reentrant": "alignflow's activation checkpointing is "
                                              "non-reentrant",
    "model.gradient_checkpointing_reentrant": "alignflow's activation checkpointing is "
                                              "non-reentrant",
    "ckpt.disable_ds": "alignflow's checkpoints are its own; there is no DeepSpeed one to skip",
    "use_ms": "ModelScope is not supported (local folders, offline names and the HF cache are)",
    "algo.ptx.pretrain_data_probs": "one pretraining data set only (no mixing)",
    "algo.ptx.pretrain_split": "the pretraining data set's first split is read",
    "algo.kl.unbiased_gradient": "the importance-weighted reverse-KL gradient of KL as a loss "
                                 "(OpenRLHF v0.11.2) is not implemented: the estimator's own "
                                 "gradient is used",
}
# 0.11 keys whose every value is fine here: why it has no effect.
INERT: dict[str, str] = {
    "local_rank": "set by the DeepSpeed launcher; alignflow starts its own processes",
    "data.dataloader_num_workers": "alignflow reads prepared data from the store, without "
                                   "loader workers",
    "train.full_determinism_enable": "alignflow runs are deterministic on CPU already "
                                     "(bitwise across a resume)",
    "model.compute_fp32_loss_enable": "alignflow computes losses in fp32 always",
    "ckpt.max_mem": "alignflow caps checkpoints by count (ckpt.max_num), not by size",
    "data.multiturn": "multi-turn SFT: give conversations in data.input_key and leave "
                      "data.output_key null",
    "teacher.offload": "the teacher runs on its own host and hands its logits over through "
                       "the store; it never shares memory with the student",
    "perf": "no effect in OpenRLHF either (from v0.7.1)",
    "actor_init_on_gpu": "no effect in OpenRLHF either (never read by train_ppo_ray)",
    "disable_trace_cache": "a ZeRO-3 speed switch (OpenRLHF <= v0.5.4); alignflow's ZeRO-3 has "
                           "no trace cache to disable",
}


def _follow(cli: str, name: str, seen: frozenset[str] = frozenset()) -> Target | None:
    """The rename chain of `--name` within `cli`, to the flag(s) of OpenRLHF 0.11."""
    flag = reference.of_cli(cli).get(name)
    if flag is None or not flag.renamed or name in seen:
        return None
    keys: list[str] = []
    value = None
    for item in flag.renamed.split():
        new, _, fixed = item.partition("=")
        value = value or fixed or None
        nxt = _follow(cli, new, seen | {name}) if new != name else None
        if nxt is None and new != name and new in reference.of_cli(cli):
            return None  # renamed to a flag that was dropped in turn
        keys += nxt.keys if nxt else [new]
        value = value or (nxt.value if nxt else None)
    return Target(tuple(keys), value)


@functools.cache
def target(cli: str, name: str) -> Target | None:
    """The 0.11 key(s) flag `--name` of `cli` sets, or None when OpenRLHF dropped it."""
    if name not in reference.of_cli(cli) or name in CONVERTED:
        return None
    if name in EXTRA:
        return EXTRA[name]
    if name in ELSEWHERE:
        return ELSEWHERE[name]
    for source in dict.fromkeys((cli, SISTER.get(cli, cli), *LIVING)):
        found = _follow(source, name)
        if found is not None:
            return found
    return None


def openrlhf_aliases(*clis: str) -> dict[str, tuple[str, ...]]:
    """Flag name -> key(s), for every flag of `clis` that is a plain rename (the first CLI
    that has a flag decides); switches for a value (`--bf16`) are the front end's."""
    out: dict[str, tuple[str, ...]] = {}
    for cli in clis:
        for name in reference.of_cli(cli):
            found = target(cli, name)
            if found is not None and found.value is None and found.keys != (name,):
                out.setdefault(name, found.keys)
    return out


SEED = ("seed", "train.seed")  # the run seed, outside the config


@dataclass(frozen=True)
class Decision:
    """What `alignflow run` does with one OpenRLHF flag, for a config with given keys.

    kind: key (sets `keys`), switch (sets `keys` to `value`), era (its release's meaning,
    `era.py`), seed (the run seed), inert (accepted, no effect: `reason`), missing (refused
    unless given OpenRLHF's default: `reason`)
    """

    kind: Literal["key", "switch", "era", "seed", "inert", "missing"]
    keys: tuple[str, ...] = ()
    value: str | None = None
    reason: str = ""


def decide(flag: reference.Flag, paths: Container[str]) -> Decision:
    """The one rule for a flag of `flag.cli`, given the config's dotted key `paths`."""
    if flag.name in CONVERTED:
        return Decision("era", reason="its release's meaning (see docs/openrlhf.md)")
    if flag.name in SEED:
        return Decision("seed")
    found = target(flag.cli, flag.name)
    if found is None:
        return Decision("inert", reason=f"no effect in OpenRLHF either ({flag.note})")
    lacking = [k for k in found.keys if k not in paths]
    if not lacking:
        return Decision("key" if found.value is None else "switch", found.keys, found.value)
    key = lacking[0]
    if key in INERT:
        return Decision("inert", (key,), reason=INERT[key])
    return Decision("missing", (key,), reason=MISSING.get(key, ""))
