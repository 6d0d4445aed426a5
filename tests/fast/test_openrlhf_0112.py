"""OpenRLHF v0.11.2's new flags (issue 47, item 9) and the keys a flag sets without naming
them, each said in a `note:` line (item 11).

The expectation, OpenRLHF v0.11.2's train_ppo_ray (docs/reference/openrlhf-flags.md, from its
pull requests #1309 and #1339): `--actor.loss_agg_mode {token-mean, seq-mean-token-mean}`;
`--algo.kl.unbiased_gradient` (store_true); `--algo.advantage.estimator flash_reinforce`;
`--algo.advantage.is_correction_level {off, token, seq}` (default off) × `_mode {mask,
clip}` (default mask) × `_gating {ratio, binary_kl, tv}` (default ratio) replacing
`_enable` / `_type` (tis = token clip, icepop = token mask, seq-mask-tis = seq mask). And
OpenRLHF <= v0.10.2 averaged each micro-batch's loss on its own (`train.loss_normalizer
micro_batch` for a command line of flat flags).
"""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.compat import reference


def _run(*flags: str):
    return check_run("grpo", None, [], list(flags), check=False)


def test_every_v0112_flag_is_in_the_table():
    ppo = reference.of_cli("train_ppo_ray")
    for name in ("actor.loss_agg_mode", "algo.kl.unbiased_gradient",
                 "algo.advantage.is_correction_level", "algo.advantage.is_correction_mode",
                 "algo.advantage.is_correction_gating"):
        assert ppo[name].first == "v0.11.2", name
    assert ppo["algo.advantage.is_correction_enable"].last == "v0.11.0"
    assert reference.NEWEST == "v0.11.2"


def test_loss_agg_mode_is_algo_loss_agg():
    assert _run("--actor.loss_agg_mode", "seq-mean-token-mean").config.algo.loss_agg == \
        "seq-mean-token-mean"


@pytest.mark.parametrize(("flags", "kind"), [
    (("--algo.advantage.is_correction_level", "token", "--algo.advantage.is_correction_mode",
      "clip"), "tis"),
    (("--algo.advantage.is_correction_level", "token"), "icepop"),
    (("--algo.advantage.is_correction_level", "seq"), "seq-mask-tis"),
])
def test_the_three_is_knobs_are_enable_and_type(flags, kind):
    checked = _run(*flags)
    advantage = checked.config.algo.advantage
    assert advantage.is_correction_enable and advantage.is_correction_type == kind
    assert f"algo.advantage.is_correction_type = {kind}, set by --algo.advantage." \
        "is_correction_level" in " ".join(checked.notes)
    assert not _run("--algo.advantage.is_correction_level", "off").config.algo.advantage \
        .is_correction_enable


def test_flash_reinforce_s_trust_region_is_a_seq_mask_on_binary_kl():
    """OpenRLHF 0.11.2: `--algo.advantage.is_correction_level seq --..._gating binary_kl
    --..._threshold 0.003` (one value: an upper bound only, `train_ppo_ray.py` inserts 0)."""
    checked = _run("--algo.advantage.is_correction_level", "seq",
                   "--algo.advantage.is_correction_gating", "binary_kl",
                   "--algo.advantage.is_correction_threshold", "0.003")
    advantage = checked.config.algo.advantage
    assert advantage.is_correction_enable and advantage.is_correction_type == "seq-mask-tis"
    assert advantage.is_correction_gating == "binary_kl"
    assert advantage.is_correction_threshold == (0.0, 0.003)


@pytest.mark.parametrize(("flags", "says"), [
    (("--algo.advantage.is_correction_level", "token", "--algo.advantage.is_correction_mode",
      "clip", "--algo.advantage.is_correction_gating", "tv"), "and mode mask with gating tv"),
    (("--algo.advantage.is_correction_level", "seq", "--algo.advantage.is_correction_mode",
      "clip"), "expected level token with mode clip or mask, or level seq with mode mask"),
    (("--algo.kl.unbiased_gradient",), "--algo.kl.unbiased_gradient: the importance-weighted"),
])
def test_what_alignflow_lacks_is_refused_in_one_line(flags, says):
    with pytest.raises(ConfigError) as info:
        _run(*flags)
    assert says in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("flag", [("--use_tensorboard", "tb"), ("--init_kl_coef", "0.01")])
def test_a_flat_flag_says_each_key_it_moves(flag):
    checked = _run(*flag)
    assert checked.config.train.loss_normalizer == "micro_batch"
    assert any(n.startswith("train.loss_normalizer = micro_batch, set by OpenRLHF "
                            "v0.10.1.post2's flags") for n in checked.notes)
    assert not any("train.loss_normalizer" in n
                   for n in _run("--algo.kl.init_coef", "0.01").notes)
