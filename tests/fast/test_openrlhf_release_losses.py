"""Losses of a command line's own release: the IS correction of v0.9.0 (a one-sided clamp at
T, default 2) and the per-micro-batch mean of releases up to v0.10.2, each against a
re-implementation of OpenRLHF's formula at that tag.

References (OpenRLHF, `openrlhf/models/loss.py` `PolicyLoss.forward`,
`trainer/ray/ppo_actor.py` `training_step`, DeepSpeed's 1/gas):
- v0.9.0:  w = exp(old − rollout).clamp(max=T); loss = masked_mean(w · ℓ) per micro-batch
- v0.10.1.post2: loss_mb = masked_mean(ℓ, mask_mb); the step's gradient is Σ_mb loss_mb / gas
- v0.11.0: loss_mb = Σ ℓ·mask_mb / N_step_tokens; the step is Σ_mb loss_mb
"""

from __future__ import annotations

import torch

from alignflow.flows.cli.run_config import build_config
from alignflow.tasks.losses.is_correction import is_weights
from alignflow.tasks.losses.policy import policy_loss
from alignflow.tasks.rl.minibatch import Counts, split
from tests.tolerance import sum_bound


def corrected_policy_loss(logp, old, behaviour, adv, mask, *, kind="tis", low=0.5, high=5.0,
                          **kw):
    """The PPO loss against `old` with each token weighted by the IS correction from
    `behaviour` (`policy_loss(..., weights=is_weights(...))`, as the learner calls it)."""
    w, is_metrics = is_weights(old, behaviour, mask, kind=kind, low=low, high=high)
    loss, metrics = policy_loss(logp, old, adv, mask, weights=w, **kw)
    return loss, metrics | is_metrics

torch.set_num_threads(1)


def _cfg(*flags: str):
    return build_config("grpo", None, [], list(flags))


def _batch(rows: int = 6, width: int = 5, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, width + 1, (rows,), generator=g)
    mask = (torch.arange(width)[None] < lengths[:, None]).double()
    logp = (-torch.rand(rows, width, generator=g, dtype=torch.float64)).requires_grad_()
    old = logp.detach() + 0.3 * torch.randn(rows, width, generator=g, dtype=torch.float64)
    behaviour = old + 0.5 * torch.randn(rows, width, generator=g, dtype=torch.float64)
    adv = torch.randn(rows, width, generator=g, dtype=torch.float64)
    return logp, old, behaviour, adv, mask


def openrlhf_v090_is(logp, old, rollout, adv, mask, threshold: float, eps: float = 0.2):
    ratio = (logp - old).exp()
    loss = -torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
    vllm_is = torch.exp(old - rollout).clamp(max=threshold).detach()
    return ((vllm_is * loss) * mask).sum() / mask.sum()


def test_a_v090_command_line_clamps_the_is_weight_at_2_on_one_side():
    cfg = _cfg("--enable_vllm_is_correction", "--bf16")  # flags of v0.9.0 (--bf16: <= v0.9.1)
    assert cfg.algo.advantage.is_correction_threshold == (0.0, 2.0)
    assert _cfg("--enable_vllm_is_correction", "--vllm_is_truncated_threshold", "3"
                ).algo.advantage.is_correction_threshold == (0.0, 3.0)
    assert _cfg("--enable_vllm_is_correction", "--vllm_is_truncated_threshold", "0.5", "4"
                ).algo.advantage.is_correction_threshold == (0.5, 4.0)
    assert _cfg("--enable_vllm_is_correction").algo.advantage.is_correction_threshold == (
        0.5, 5.0)  # v0.10.1.post2's default band
    low, high = cfg.algo.advantage.is_correction_threshold
    logp, old, behaviour, adv, mask = _batch()
    ours, _ = corrected_policy_loss(logp, old, behaviour, adv, mask, kind="tis", low=low,
                                    high=high)
    ref = openrlhf_v090_is(logp, old, behaviour, adv, mask, 2.0)
    assert torch.allclose(ours, ref, rtol=1e-12, atol=0)


def _step_loss(counts: Counts, logp, old, adv, mask, batches: list[list[int]]):
    """The step's loss as the learn step accumulates it: Σ_b w_b · loss_b."""
    step = [i for b in batches for i in b]
    total = logp.new_zeros(())
    for b, w in zip(batches, counts.weights(step, batches), strict=True):
        loss, _ = policy_loss(logp[b], old[b], adv[b], mask[b], norm=counts.norm(step, b))
        total = total + w * loss
    return total


def _ppo_tokens(logp, old, adv, eps: float = 0.2):
    ratio = (logp - old).clamp(-20, 20).exp()
    return -torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)


def openrlhf_v0101_step(logp, old, adv, mask, batches):
    return sum(((_ppo_tokens(logp[b], old[b], adv[b]) * mask[b]).sum() / mask[b].sum())
               for b in batches) / len(batches)


def openrlhf_v011_step(logp, old, adv, mask, batches):
    n = sum(mask[b].sum() for b in batches)
    return sum((_ppo_tokens(logp[b], old[b], adv[b]) * mask[b]).sum() / n for b in batches)


def test_flat_flags_average_each_micro_batch_dotted_ones_the_step():
    assert _cfg("--micro_train_batch_size", "2").train.loss_normalizer == "micro_batch"
    assert _cfg("--train.micro_batch_size", "2").train.loss_normalizer == "step"
    assert _cfg().train.loss_normalizer == "step"
    assert _cfg("--seed", "3").train.loss_normalizer == "step"  # the run seed says nothing
    assert _cfg("--micro_train_batch_size", "2", "--train.loss_normalizer", "step"
                ).train.loss_normalizer == "step"
    logp, old, _b, adv, mask = _batch()
    batches = split(list(range(6)), [], 2, None)
    for mode, reference in (("micro_batch", openrlhf_v0101_step), ("step", openrlhf_v011_step)):
        counts = Counts.of(mask, torch.ones(6), [1] * 6, mode)
        ours = _step_loss(counts, logp, old, adv, mask, batches)
        ref = reference(logp, old, adv, mask, batches)
        assert torch.allclose(ours, ref, rtol=1e-12, atol=0), mode
        (g_ours,) = torch.autograd.grad(ours, logp)
        (g_ref,) = torch.autograd.grad(ref, logp)
        assert torch.allclose(g_ours, g_ref, rtol=0,
                              atol=sum_bound(int(mask.sum()), 1.0, torch.float64)), mode


def test_the_two_normalisers_differ_when_micro_batches_hold_different_token_counts():
    logp, old, _b, adv, mask = _batch(seed=3)
    batches = [[0, 1], [2, 3], [4, 5]]
    assert len({float(mask[b].sum()) for b in batches}) > 1
    losses = [_step_loss(Counts.of(mask, torch.ones(6), [1] * 6, mode), logp, old, adv, mask,
                         batches) for mode in ("step", "micro_batch")]
    assert not torch.allclose(*losses)


def test_sft_of_flat_flags_averages_each_micro_batch():
    """OpenRLHF v0.10.1.post2 sft_trainer: GPTLMLoss (a token mean per micro-batch), summed
    over the step's micro-batches / gas; v0.11.0: Σ token losses / the step's tokens."""
    from types import SimpleNamespace

    from alignflow.tasks.offline.objectives import Context, Out
    from alignflow.tasks.offline.train import run_step

    assert build_config("sft", None, [], ["--micro_train_batch_size", "2"]
                        ).train.loss_normalizer == "micro_batch"
    masks = [[0, 1, 1], [0, 1, 1, 1, 1, 1], [0, 1], [0, 1, 1, 1]]  # label tokens 2, 5, 1, 3
    nll = torch.tensor([0.5, 2.0, 1.0, 4.0], dtype=torch.float64)  # per-token loss of each row
    ctx = Context({"loss_mask": masks}, 0, None)

    def loss(model, idx, ctx, denom):
        tokens = [sum(masks[i][1:]) for i in idx]
        return Out(sum(nll[i] * n for i, n in zip(idx, tokens, strict=True)) / denom, {}, {})

    class Trainer:
        def step(self, batches, loss_fn, weights):
            self.loss = sum(w * loss_fn(None, b)[0] for b, w in zip(batches, weights, strict=True))
            return {}

    obj, tok = SimpleNamespace(token_level=True, loss=loss), [2, 5, 1, 3]
    per_mb = sum(sum(nll[i] * tok[i] for i in b) / sum(tok[i] for i in b)
                 for b in ([0, 1], [2, 3])) / 2
    whole = sum(nll[i] * tok[i] for i in range(4)) / sum(tok)
    for mode, expected in (("micro_batch", per_mb), ("step", whole)):
        trainer = Trainer()
        run_step(trainer, obj, ctx, [0, 1, 2, 3], 2, mode)
        assert torch.allclose(trainer.loss, expected, rtol=1e-12, atol=0), mode
