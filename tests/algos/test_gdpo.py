"""GDPO multi-reward normalisation (`algo.advantage.multi_reward_norm=per_source`): an oracle
on fixed tensors, the one-line refusal of bad values, and one GRPO iteration on the tiny
model with two rule sources whose per-source normalised values are read back with SQL."""

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow
from alignflow.tasks.advantages.estimators import group_normalize
from alignflow.tasks.advantages.multi_reward import gdpo_reward, per_source_normalize

# one prompt, four samples: source a on a 0–10 scale, source b a 0/1 check that disagrees
BIG = torch.tensor([10.0, 8.0, 2.0, 0.0])
SMALL = torch.tensor([0.0, 0.0, 1.0, 1.0])


def test_per_source_gives_each_source_an_equal_say():
    """By hand: a = (10,8,2,0) has mean 5, std √(68/3); b = (0,0,1,1) mean ½, std √(1/3).
    GRPO on the sum (10,8,3,1) is a's normalised reward within 0.04 (b has no say: sample 1
    stays above sample 2); GDPO sums two unit-std parts, so b reverses that order."""
    combined, parts = per_source_normalize({"a": BIG, "b": SMALL}, n=4)
    want_a = torch.tensor([5.0, 3.0, -3.0, -5.0]) / (68 / 3) ** 0.5
    want_b = torch.tensor([-0.5, -0.5, 0.5, 0.5]) / (1 / 3) ** 0.5
    assert torch.allclose(parts["a"], want_a, atol=1e-6)
    assert torch.allclose(parts["b"], want_b, atol=1e-6)
    assert torch.allclose(combined, want_a + want_b, atol=1e-6)
    assert all(torch.isclose(p.std(), torch.tensor(1.0), atol=1e-6) for p in parts.values())
    grpo = group_normalize(BIG + SMALL, 4)
    assert (grpo - want_a).abs().max() < 0.04 and grpo[1] > grpo[2]
    assert combined[2] > combined[1] and combined[0] > 0 > combined[3]


def test_weights_and_batch_whitening():
    """Weights scale each normalised source; the batch result has mean 0, population std 1."""
    combined, parts = per_source_normalize({"a": BIG, "b": SMALL}, 4, {"a": 2.0})
    assert torch.allclose(combined, 2 * parts["a"] + parts["b"], atol=1e-6)
    two = {"a": torch.cat([BIG, BIG / 10]), "b": torch.cat([SMALL, 1 - SMALL])}
    out = gdpo_reward(two, 4)
    assert abs(float(out.mean())) < 1e-6
    assert abs(float(out.pow(2).mean()) - 1.0) < 1e-5


def _cfg(sets):
    _, cls = load_flow("grpo")
    return load_config(cls, sets=sets)


def test_spellings_and_refusals(rl_sets):
    """Peers' spellings resolve to the same config; a bad value, or GDPO with a non-group
    estimator, is refused in one line naming the key."""
    for alias in ("per_source", "gdpo", "normalize_then_sum", "GDPO"):
        cfg = _cfg([*rl_sets, f"algo.advantage.multi_reward_norm={alias}"])
        assert cfg.algo.advantage.multi_reward_norm == "per_source"
    assert _cfg(rl_sets).algo.advantage.multi_reward_norm == "sum"
    with pytest.raises(ConfigError) as bad:
        _cfg([*rl_sets, "algo.advantage.multi_reward_norm=mean"])
    assert "multi_reward_norm" in str(bad.value) and "\n" not in str(bad.value).strip()
    with pytest.raises(ConfigError, match="multi_reward_norm"):
        _cfg([*rl_sets, "algo.advantage.multi_reward_norm=gdpo",
              "algo.advantage.estimator=rloo"])


NORM = "gdpo"  # "sum" here makes the SQL check below fail (checked)

# the GDPO advantage of each sample, recomputed in SQL from the committed per-source rewards
PER_SOURCE_SQL = """
SELECT prompt_id, sample_idx, advantages[1] AS adv,
       (scores['e'] - avg(scores['e']) OVER g) / (stddev_samp(scores['e']) OVER g + 1e-9) AS ne,
       (scores['t'] - avg(scores['t']) OVER g) / (stddev_samp(scores['t']) OVER g + 1e-9) AS nt
FROM rollouts WHERE run_id = 'gdpo' AND iteration = 0
WINDOW g AS (PARTITION BY prompt_id) ORDER BY prompt_id, sample_idx"""


@pytest.mark.slow
def test_one_gdpo_iteration_read_back_with_sql(rl_sets, tmp_path):
    """Sources e and t (weights 3, 1): each sample's stored advantage equals
    (3·Â_e + Â_t) / its batch std, with Â_k computed by SQL from `scores[k]`."""
    sets = [s for s in rl_sets if not s.startswith("reward.sources")]
    flow, cls = load_flow("grpo")
    cfg = load_config(cls, sets=[*sets, "reward.sources=[e=rule:target:e,t=rule:target:t]",
                                 "reward.weights=[3,1]", f"algo.advantage.multi_reward_norm={NORM}",
                                 "train.max_iterations=1"])
    out = api.run(flow, cfg, store=str(tmp_path), executor="inline", seed=1, run_id="gdpo")
    assert out["iterations"] == 1
    from alignflow.catalog.catalog import Catalog
    rows = Catalog(str(tmp_path)).sql(PER_SOURCE_SQL).to_pylist()
    assert len(rows) == 32
    ne = torch.tensor([r["ne"] for r in rows], dtype=torch.float64)
    nt = torch.tensor([r["nt"] for r in rows], dtype=torch.float64)
    want = 3 * ne + nt
    want = (want - want.mean()) / (want.pow(2).mean().sqrt() + 1e-9)
    adv = torch.tensor([r["adv"] for r in rows], dtype=torch.float64)
    assert want.abs().max() > 0.5     # the rewards varied: the check is not 0 == 0
    assert torch.allclose(adv, want, atol=1e-4)  # float32 storage of |A| ≲ 3
