"""One set of defaults: alignflow's default for every key OpenRLHF has is OpenRLHF's own
(0.11's; a CLI OpenRLHF removed: its last release's). The few keys where a flow must differ
are `DIFFERENT`, each with the reason; `tests/fast/test_openrlhf_flags.py` fails when a
default differs without an entry, or an entry no longer differs, and docs/openrlhf.md lists
them from here."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from alignflow.errors import ConfigError
from alignflow.flows.compat import reference, rules
from alignflow.flows.config.build import resolve_config
from alignflow.flows.config.types import config_paths
from alignflow.flows.config.values import coerce
from alignflow.flows.loader import config_class_of

HARDWARE = ("runs anywhere: OpenRLHF's default needs GPUs (alignflow trains with PyTorch on "
            "what the machine has; the run plan places work on GPUs when there are some)")
PLACE = "a place: alignflow keeps checkpoints and the final model in its store"
OWN_DATA = ("alignflow has default data sets and rewards (OpenRLHF has none): a flow with no "
            "`--prompt_data`/`--dataset` runs on them")
# (flow or "*", key) -> why alignflow's default differs from OpenRLHF's.
GROUP = ("the flow compares the samples of a prompt: OpenRLHF's default of one sample per "
         "prompt cannot run it (OpenRLHF refuses it too), so the flow takes 8")
DIFFERENT: dict[tuple[str, str], str] = {
    **{("*", f"{role}.num_gpus_per_node"): HARDWARE
       for role in ("actor", "critic", "ref", "reward")},
    ("*", "ds.zero_stage"): HARDWARE + "; a ZeRO stage selects DeepSpeed",
    ("*", "ds.param_dtype"): HARDWARE + "; fp32 is exact on every machine, bf16 where asked",
    ("*", "ds.attn_implementation"): HARDWARE + "; flash attention needs flash-attn on a GPU",
    ("*", "train.colocate_all"): HARDWARE + "; null: OpenRLHF's false on a cluster with "
                                            "GPUs; without GPUs every role in one process "
                                            "unless a colocate_* pair asks for separate ones",
    ("*", "vllm.num_engines"): HARDWARE + "; 0: one engine where the policy is (vLLM where "
                                          "installed, else HF generate)",
    ("*", "vllm.gpu_memory_utilization"): HARDWARE + "; null: 0.95 on GPUs",
    ("*", "ckpt.output_dir"): PLACE, ("*", "ckpt.path"): PLACE,
    ("*", "logger.wandb.project"): "a name: alignflow's runs log to the W&B project "
                                   "`alignflow` unless told otherwise",
    ("*", "actor.model_name_or_path"): OWN_DATA + " (SmolLM2-135M-Instruct, offline)",
    ("*", "model.model_name_or_path"): OWN_DATA + " (SmolLM2-135M-Instruct, offline)",
    ("*", "data.prompt_dataset"): OWN_DATA + " (alignflow:gsm8k)",
    ("*", "data.dataset"): OWN_DATA + " (sft: alignflow:gsm8k-sft, dpo and rm: "
                                      "alignflow:champ-pairs, kto: alignflow:champ-kto)",
    ("*", "algo.advantage.estimator"): "the flow names the estimator (`alignflow run grpo` is "
                                       "group_norm); ppo keeps OpenRLHF's gae",
    ("prm", "data.placeholder_token"): "a PRM needs the token that ends each step (OpenRLHF's "
                                       "none cannot run): Math-Shepherd's ки, which OpenRLHF's "
                                       "PRM example trains on",
    ("dr_grpo", "algo.loss_agg"): "the flow is Dr.GRPO's paper: each response's token sum "
                                  "over a constant (seq-mean-token-sum-norm); OpenRLHF's "
                                  "dr_grpo changes only the advantage (`--actor.loss_agg_mode`, "
                                  "v0.11.2, sets it)",
    ("grpo", "rollout.n_samples_per_prompt"): GROUP,
    ("rloo", "rollout.n_samples_per_prompt"): GROUP,
    ("dr_grpo", "rollout.n_samples_per_prompt"): GROUP,
    ("reinforce_pp_baseline", "rollout.n_samples_per_prompt"): GROUP,
}


def differences(flow: str) -> list[tuple[str, Any, Any]]:
    """(key, OpenRLHF's default, alignflow's) for every key of `flow` where they differ."""
    cls = config_class_of(flow)
    paths, ours = config_paths(cls), _defaults(flow)
    out = []
    for cli in getattr(cls, "OPENRLHF", ())[:1]:  # the flow's own CLI (loops borrow theirs)
        newest = max(reference.release(f.last) for f in reference.of_cli(cli).values())
        for flag in reference.of_cli(cli).values():
            decision = rules.decide(flag, paths)
            if decision.kind != "key" or not flag.present(newest) or decision.value:
                continue
            for key in (k for k in decision.keys if not _required_key(flow, k)):
                theirs = _typed(flag.default_at(newest), paths[key], key)
                if theirs is not _SKIP and not _same(theirs, ours.get(key, _SKIP)):
                    out.append((key, theirs, ours.get(key)))
    return out


_SKIP = object()


def _same(theirs: Any, ours: Any) -> bool:
    """Equal, or both "none" (OpenRLHF's None, alignflow's '' for "give one")."""
    return theirs == ours or (theirs in (None, "") and ours in (None, ""))


def _typed(text: str, tp: Any, key: str) -> Any:
    value = reference.value_of(text)
    if isinstance(value, str) and value in ("—", "required"):
        return _SKIP
    with contextlib.suppress(ConfigError):
        return coerce(value, tp, key)
    return value


@functools.cache
def _defaults(flow: str) -> dict[str, Any]:
    """Every leaf key's default in `flow`'s config."""
    cls = config_class_of(flow)
    cfg = resolve_config(cls, sets=_required(flow)).config
    out = {}
    for key in config_paths(cls):
        value = cfg
        for part in key.split("."):
            value = getattr(value, part + ("_" if part == "async" else ""), None)
        out[key] = value
    return out


def _required(flow: str) -> list[str]:
    """The keys a flow cannot run without (distill: its teacher)."""
    return {"distill": ["teacher.model_name_or_path=tiny-llama"],
            "on_policy_distill": ["teacher.model_name_or_path=tiny-llama"]}.get(flow, [])


def _required_key(flow: str, key: str) -> bool:
    return any(item.startswith(key + "=") for item in _required(flow))


def listed(flow: str, key: str) -> str | None:
    """Why `flow`'s default of `key` differs from OpenRLHF's, if it may."""
    return DIFFERENT.get((flow, key)) or DIFFERENT.get(("*", key))
