"""HF sequence-classification reward model on the tiny Llama RM: last-token scoring,
padding independence, normalisation, offload/reload."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.rewards import RewardConfig, build_reward
from alignflow.tasks.rewards.model_rm import ModelRewardModel, last_token_index
from tests.tolerance import network_bound

torch.set_num_threads(1)

TEXTS = ["hi", "the cat sat on the mat", "a much longer text, with some words in it " * 3, "ok!"]


@pytest.fixture(scope="module")
def rm(tiny_rm_dir):
    return ModelRewardModel(tiny_rm_dir, micro_batch=8)


def _score(rm, texts):
    return rm.score(texts, [""] * len(texts), [None] * len(texts)).rewards


def _alone(rm, text):
    return _score(rm, [text])[0]


def test_last_token_index_both_sides():
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 0, 0]])
    assert last_token_index(mask).tolist() == [1, 3, 3, 1]


def test_score_matches_hf_on_an_unpadded_text(rm):
    """Alone, nothing is padded, so HF's own pooled logit is the reference."""
    for text in TEXTS:
        enc = rm.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            ref = rm.model(**enc).logits[0, 0]
        assert torch.allclose(_alone(rm, text), ref, atol=1e-6), text


@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_independence(rm, side):
    rm.tokenizer.padding_side = side
    try:
        alone = torch.stack([_alone(rm, t) for t in TEXTS])
        batched = _score(rm, TEXTS)
    finally:
        rm.tokenizer.padding_side = "right"
    assert len(set(alone.tolist())) == len(TEXTS)  # distinct texts, distinct scores
    tol = network_bound(rm.model.config, alone.abs().max())  # tests/tolerance.py
    assert torch.allclose(batched, alone, atol=tol, rtol=0), (batched - alone).abs().max()


def test_micro_batches_agree(tiny_rm_dir, rm):
    small = ModelRewardModel(tiny_rm_dir, micro_batch=3)
    whole = _score(rm, TEXTS)
    assert torch.allclose(small.score(TEXTS, [""] * 4, [None] * 4).rewards, whole,
                          atol=network_bound(rm.model.config, whole.abs().max()), rtol=0)


def test_pad_equal_to_eos_and_text_ending_in_eos(tiny_rm_dir):
    """HF's pooling would stop at the first trailing eos; the mask-based index does not."""
    rm = ModelRewardModel(tiny_rm_dir)
    eos = rm.tokenizer.eos_token
    rm.tokenizer.pad_token = eos
    rm.model.config.pad_token_id = rm.tokenizer.eos_token_id
    texts = [f"short{eos}", f"a far longer answer text{eos}"]
    alone = torch.stack([_alone(rm, t) for t in texts])
    assert torch.allclose(_score(rm, texts), alone, rtol=0,
                          atol=network_bound(rm.model.config, alone.abs().max()))


def test_normalisation_from_config(tiny_rm_dir, rm, tmp_path):
    folder = tmp_path / "rm"
    shutil.copytree(tiny_rm_dir, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(cfg | {"mean": 0.25, "std": 2.0}))
    norm = ModelRewardModel(folder, normalize=True)
    raw = _score(rm, TEXTS)
    out = norm.score(TEXTS, [""] * 4, [None] * 4)
    assert torch.allclose(out.rewards, (raw - 0.25) / 2.0, atol=1e-6)
    assert torch.allclose(out.scores["raw"], raw, atol=1e-6)


def openrlhf_normalized(raw: torch.Tensor, config: dict) -> torch.Tensor:
    """OpenRLHF v0.11.0 models/model.py: mean/std buffers start at 0 and 1 and take the
    config's values when it has a `mean`; the reward is (r - mean) / std."""
    mean, std = (config["mean"], config["std"]) if "mean" in config else (0.0, 1.0)
    return (raw - mean) / std


def test_normalisation_without_stats_in_the_config_is_the_identity(tiny_rm_dir, rm, tmp_path):
    """--normalize_reward with a reward model whose config has no mean/std: OpenRLHF
    divides by its defaults (0, 1); the run must not fail where --dry-run passed."""
    config = json.loads((Path(tiny_rm_dir) / "config.json").read_text())
    assert "mean" not in config
    out = ModelRewardModel(tiny_rm_dir, normalize=True).score(TEXTS, [""] * 4, [None] * 4)
    assert torch.equal(out.rewards, openrlhf_normalized(_score(rm, TEXTS), config))
    folder = tmp_path / "rm"
    shutil.copytree(tiny_rm_dir, folder)
    (folder / "config.json").write_text(json.dumps(config | {"mean": 1.0, "std": 0.0}))
    with pytest.raises(ConfigError, match="std=0.0; expected a std > 0"):
        ModelRewardModel(folder, normalize=True)


def test_offload_frees_and_reload_is_bitwise(tiny_rm_dir):
    rm = ModelRewardModel(tiny_rm_dir)
    before = _score(rm, TEXTS)
    rm.offload()
    assert rm.offloaded
    resident = sum(t.numel() for t in rm.model.state_dict().values() if t.device.type != "meta")
    assert resident == 0
    rm.reload()
    assert not rm.offloaded
    assert torch.equal(_score(rm, TEXTS), before)
    rm.offload()
    assert torch.equal(_score(rm, TEXTS), before)  # scoring while offloaded reloads first
    assert not rm.offloaded


def test_missing_folder(tmp_path):
    with pytest.raises(ConfigError, match=r"reward model folder .*nope not found"):
        ModelRewardModel(tmp_path / "nope")


def test_model_folder_spec_combined_with_a_rule(tiny_rm_dir, rm):
    reward = build_reward(RewardConfig(sources=(f"rm={tiny_rm_dir}", "rule:target:a"),
                                       weights=(2.0, 1.0), micro_batch=2))
    texts = ["aa", "ab", "bb"]
    out = reward.score(texts, [""] * 3, [None] * 3)
    raw = _score(rm, texts)
    assert torch.allclose(out.scores["rm"], raw, atol=1e-5, rtol=0)
    assert torch.allclose(out.rewards, 2 * raw + torch.tensor([1.0, 0.5, 0.0]), atol=1e-5)
    reward.offload()
    assert reward.sources["rm"].offloaded
    reward.reload()
    assert torch.equal(reward.score(texts, [""] * 3, [None] * 3).rewards, out.rewards)


def test_a_reward_model_by_offline_name_resolves_like_a_policy(tiny_rm_dir):
    from alignflow.tasks.rewards.registry import build_source, model_folder

    assert model_folder("tiny-llama-rm").endswith("tiny-llama-rm")
    assert build_source("tiny-llama-rm").score(["a b"], ["a "], [""]).rewards.shape == (1,)
    with pytest.raises(ConfigError, match="'nope': expected a rule"):
        model_folder("nope")
