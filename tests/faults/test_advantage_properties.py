"""Property tests (hypothesis) of the advantage estimators: shapes, masks, finiteness,
invariance to extra padding, equivariance under reordering a prompt's samples, and groups
whose sequence-level advantages sum to zero."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from alignflow.tasks.advantages import (
    ESTIMATORS,
    GROUP_ESTIMATORS,
    AdvantageConfig,
    RolloutBatch,
    compute_advantages,
)

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def batches(draw):
    """(estimator, cfg, batch): groups of n consecutive samples, right-padded masks."""
    name = draw(st.sampled_from(sorted(ESTIMATORS)))
    n = draw(st.integers(2, 4))
    groups, width = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, width + 1, (groups * n,), generator=g)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
    batch = RolloutBatch(reward=torch.randn(groups * n, generator=g) * 2,
                         action_mask=mask, kl=torch.randn(groups * n, width, generator=g) * 0.1,
                         values=torch.randn(groups * n, width, generator=g))
    gamma = 1.0 if name in GROUP_ESTIMATORS else draw(st.sampled_from([1.0, 0.9]))
    cfg = AdvantageConfig(estimator=name, n=n, gamma=gamma, lambd=0.95,
                          kl_coef=draw(st.sampled_from([0.0, 0.05])))
    return cfg, batch


def _pad(batch: RolloutBatch, extra: int, fill: float) -> RolloutBatch:
    """`extra` more columns of padding, holding garbage that must not matter."""
    def wider(x, value):
        return torch.cat([x, torch.full((x.shape[0], extra), value)], dim=1)
    return RolloutBatch(reward=batch.reward, action_mask=wider(batch.action_mask, 0.0),
                        kl=wider(batch.kl, fill), values=wider(batch.values, fill))


@SETTINGS
@given(batches())
def test_shape_mask_and_finite(case):
    cfg, batch = case
    out = compute_advantages(batch, cfg)
    for t in out:
        assert t.shape == batch.action_mask.shape
        assert torch.isfinite(t).all()
        assert (t[batch.action_mask == 0] == 0).all()


@SETTINGS
@given(batches(), st.integers(1, 5), st.sampled_from([0.0, 7.5, -1e3]))
def test_extra_padding_changes_nothing(case, extra, fill):
    cfg, batch = case
    base = compute_advantages(batch, cfg)
    padded = compute_advantages(_pad(batch, extra, fill), cfg)
    width = batch.action_mask.shape[1]
    for a, b in zip(base, padded, strict=True):
        assert torch.allclose(a, b[:, :width], atol=1e-5)
        assert (b[:, width:] == 0).all()


@SETTINGS
@given(batches(), st.randoms(use_true_random=False))
def test_reordering_a_prompts_samples_reorders_the_advantages(case, rnd):
    cfg, batch = case
    order = []
    for start in range(0, batch.reward.shape[0], cfg.n):
        block = list(range(start, start + cfg.n))
        rnd.shuffle(block)
        order += block
    idx = torch.tensor(order)
    moved = RolloutBatch(reward=batch.reward[idx], action_mask=batch.action_mask[idx],
                         kl=batch.kl[idx], values=batch.values[idx])
    for a, b in zip(compute_advantages(batch, cfg), compute_advantages(moved, cfg), strict=True):
        assert torch.allclose(a[idx], b, atol=1e-5)


@SETTINGS
@given(batches())
def test_group_baselines_sum_to_zero_per_prompt(case):
    cfg, batch = case
    if cfg.estimator not in ("group_norm", "dr_grpo", "rloo"):
        return
    cfg = AdvantageConfig(estimator=cfg.estimator, n=cfg.n, kl_coef=0.0, reward_clip=None)
    first = compute_advantages(batch, cfg).advantages[:, 0]  # the sequence-level value
    assert torch.allclose(first.reshape(-1, cfg.n).sum(-1), torch.zeros(1), atol=1e-4)
