"""What OpenRLHF flags of each release mean in `alignflow run`: renames and switches onto
0.11's keys, a release's own meanings for what its flags name, argparse's prefixes, and no
flag moving a key it does not name."""

from __future__ import annotations

import json

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import build_config, check_run
from alignflow.flows.compat.script import read_launches
from alignflow.flows.config import to_dict


def _cfg(flow: str, *flags: str):
    return build_config(flow, None, [], list(flags))


# what the command line's release means, whichever of its flags is given (era.py): losses
# averaged per micro-batch up to v0.10.2 (flat flags), over the step from v0.10.3
RELEASE_WIDE = {"train.loss_normalizer"}


def _changed(flow: str, *flags: str, base: tuple[str, ...] = ()) -> dict:
    """The keys a command line sets, against the flow's defaults (and `base`), bar the
    release's own loss normalisation."""
    base, cfg = _flat(to_dict(_cfg(flow, *base))), _flat(to_dict(_cfg(flow, *base, *flags)))
    return {k: v for k, v in cfg.items() if base.get(k) != v and k not in RELEASE_WIDE}


def _flat(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out


def test_no_flag_moves_a_key_it_does_not_name():
    assert _changed("grpo", "--use_tensorboard", "/tmp/tb") == {
        "logger.tensorboard_dir": "/tmp/tb"}
    assert _changed("dpo", "--ipo") == {"model.ipo_enable": True}
    assert _changed("dpo", "--label_smoothing", "0.1") == {"model.label_smoothing": 0.1}
    prm = ("--placeholder_token", "ки")
    assert _changed("prm", "--placeholder_token", "<s>", base=prm) == {
        "data.placeholder_token": "<s>"}
    assert _cfg("prm", *prm).data.label_key == "label"  # v0.9.5's, whatever else is given
    # a flat flag makes the command line one of v0.10.1.post2 or older: its losses
    assert _cfg("grpo", "--use_tensorboard", "/tmp/tb").train.loss_normalizer == "micro_batch"
    assert _cfg("grpo", "--logger.tensorboard_dir", "/tmp/tb").train.loss_normalizer == "step"


def test_switches_of_older_releases_set_their_value():
    cfg = _cfg("grpo", "--bf16", "--flash_attn", "--use_kl_estimator_k3")
    assert (cfg.ds.param_dtype, cfg.ds.attn_implementation, cfg.algo.kl.estimator) == (
        "bf16", "flash_attention_2", "k3")
    assert _cfg("grpo", "--flash").ds.attn_implementation == "flash_attention_2"  # a prefix
    assert _cfg("grpo", "--init_kl", "0.2").algo.kl.init_coef == 0.2


def test_an_ambiguous_prefix_is_refused_like_argparse_does():
    with pytest.raises(ConfigError, match="unknown flag '--lora'"):
        _cfg("sft", "--lora", "8")


def test_the_bf16_era_without_bf16_trains_in_the_models_own_dtype(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    assert _cfg("sft", "--flash_attn", "--pretrain", str(model)).ds.param_dtype == "bf16"
    (model / "config.json").write_text(json.dumps({"torch_dtype": "float32"}))
    assert _cfg("sft", "--flash_attn", "--pretrain", str(model)).ds.param_dtype == "fp32"
    assert _cfg("sft", "--pretrain", str(model)).ds.param_dtype == "fp32"  # 0.11: not named


def test_prompt_and_response_lengths_of_their_release():
    old = _cfg("grpo", "--prompt_max_len", "100", "--generate_max_len", "20", "--bf16")
    assert (old.data.max_len, old.rollout.max_new_tokens, old.data.truncation_side) == (
        120, 20, "right")  # v0.9.0 kept an over-long prompt's start
    later = _cfg("grpo", "--prompt_max_len", "100", "--param_dtype", "bf16")
    assert (later.data.max_len, later.rollout.max_new_tokens, later.data.truncation_side) == (
        1124, 1024, "left")  # the missing one at its default; v0.9.1+ kept the end
    assert _cfg("grpo", "--max_len", "300", "--prompt_max_len", "100", "--generate_max_len",
                "50").data.max_len == 300  # until v0.9.7 --max_len overrides P + G
    new = _cfg("grpo", "--max_len", "300")  # v0.9.8+: the total, responses fill the rest
    assert (new.data.max_len, new.rollout.max_new_tokens, new.data.truncation_side) == (
        300, None, "left")


def test_distillation_keeps_train_kd_meaning():
    cfg = _cfg("distill", "--teacher_model", "tiny-llama", "--kd_coef", "0.4",
               "--teacher_offload")
    assert cfg.model.kd_coef == 0.4 and cfg.teacher.model_name_or_path == "tiny-llama"
    plan = check_run("distill", None, [], ["--teacher_model", "tiny-llama", "--teacher_offload"],
                    check=False)
    assert any(n.startswith("--teacher_offload: accepted, no effect") for n in plan.notes)


def test_a_ptx_script_gets_its_releases_ptx_coef():
    cfg = _cfg("ppo", "--pretrain_data", "some/data")
    assert (cfg.algo.ptx.pretrain_data, cfg.algo.ptx.ptx_coef) == ("some/data", 0.05)


def test_flags_without_a_key_ask_for_nothing_or_are_refused_with_why():
    plan = check_run("grpo", None, [], ["--aux_loss_coef", "0", "--local_rank", "0"],
                     check=False)
    assert any("--aux_loss_coef 0: OpenRLHF's default" in n for n in plan.notes)
    with pytest.raises(ConfigError, match="--aux_loss_coef 0.1: the MoE auxiliary loss is not "
                                          "implemented"):
        _cfg("grpo", "--aux_loss_coef", "0.1")
    with pytest.raises(ConfigError, match="unknown flag '--async_train'"):
        _cfg("dpo", "--async_train")  # not a train_dpo flag in any release
    assert _cfg("grpo", "--vllm_num_engines", "2").vllm.num_engines == 2


def test_scripts_fill_in_the_shell():
    text = "\n".join([
        "N=${N:-4}",
        "ARGS=(--max_epochs 2 --zero_stage 3)",
        "read -r -d '' CMD <<END",
        "openrlhf.cli.train_sft \\",
        "   --pretrain ${MODEL:-m}",
        "   --max_len $((N * 256))",
        "END",
        'deepspeed --module $CMD "${ARGS[@]}" --save_path $(pwd)/out --use_wandb $WANDB',
        "echo $CMD", ""])
    (launch,) = read_launches(text, env={})
    assert launch.flags == ["--pretrain", "m", "--max_len", "1024", "--max_epochs", "2",
                            "--zero_stage", "3", "--save_path", "$(pwd)/out", "--use_wandb",
                            "$WANDB"]


def test_translate_leaves_the_shell_its_substitutions():
    from alignflow.flows.compat.translate import render, translate

    text = ("python -m openrlhf.cli.train_sft --pretrain tiny-llama --save_path $(pwd)/out "
            "--use_wandb $WANDB_KEY --flash_attn\n")
    rendered = render(translate(read_launches(text, env={})[0]))
    assert '--save_path "$(pwd)/out"' in rendered and "--use_wandb true" in rendered
    assert "--flash_attn" in rendered and "attn_implementation: flash_attention_2" in rendered
