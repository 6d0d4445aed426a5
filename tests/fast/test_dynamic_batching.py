"""Dynamic batching (`train.dynamic_batch_enable`, OpenRLHF's `--use_dynamic_batch`):
micro-batches by token budget give a step the loss and gradient of fixed micro-batches
(the step's token mean does not depend on the cut), and inference passes the same values."""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch

from alignflow.flows.cli.run_config import build_config
from alignflow.tasks.modeling.batching import first_fit, inference_chunks
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.rl import learn, minibatch
from alignflow.tasks.rl.correction import proximal_logprobs
from alignflow.tasks.rl.experience import Advantages, Experience, lengths
from alignflow.tasks.rl.kl_penalty import KLPenalty
from alignflow.tasks.rl.learn_config import AlgoConfig, KLConfig, LearnSettings, RLRewardConfig
from alignflow.tasks.rl.roles import ActorConfig, CriticConfig
from alignflow.tasks.trainers.optim import TrainConfig
from tests.tolerance import gradient_bound, network_bound

torch.set_num_threads(1)


def test_first_fit_counts_micro_batches_as_openrlhf():
    """OpenRLHF's get_minimum_num_micro_batch_size: [5, 3, 7, 2, 6] at 10 -> [10, 7, 6]."""
    bins = first_fit(list(range(5)), [5, 3, 7, 2, 6], 10)
    assert bins == [[0, 1, 3], [2], [4]]
    assert first_fit([0, 1], [12, 3], 10) == [[0], [1]]  # too long: alone
    assert inference_chunks([[1]] * 3, [[2, 2]] * 3, 2) == [[0, 1], [2]]
    assert inference_chunks([[1]] * 3, [[2, 2]] * 3, 2, max_tokens=6) == [[0, 1], [2]]


def test_the_keys_and_openrlhf_flags():
    cfg = build_config("grpo", None, [], ["--use_dynamic_batch", "--train_max_tokens_per_gpu",
                                          "64"])
    assert cfg.train.dynamic_batch_enable and cfg.learn.max_tokens == 64
    assert cfg.rollout_max_tokens == 64  # OpenRLHF fills the rollout budget in from train's
    cfg = build_config("grpo", None, [], ["--train.dynamic_batch_enable",
                                          "--rollout.max_tokens_per_gpu", "32"])
    assert (cfg.learn.max_tokens, cfg.rollout_max_tokens) == (16192, 32)
    assert build_config("grpo", None, [], []).learn.max_tokens is None
    with pytest.raises(Exception, match="max_tokens_per_gpu"):
        build_config("grpo", None, ["train.max_tokens_per_gpu=0"], [])


class GradTrainer:
    """The trainer's accumulation (Σ_b w_b · loss_b backward) without an optimizer step."""

    def __init__(self, model) -> None:
        self.model, self.global_step, self.batches = model, 0, []

    def step(self, batches, loss_fn, *, weights):
        self.model.zero_grad(set_to_none=True)
        self.batches, self.loss = [b["idx"] for b in batches], 0.0
        for batch, w in zip(batches, weights, strict=True):
            loss, _ = loss_fn(self.model, batch)
            (loss * w).backward()
            self.loss += w * float(loss.detach())
        self.grads = {n: p.grad.clone() for n, p in self.model.named_parameters()
                      if p.grad is not None}
        return {}


def _experience(tok):
    prompts = [tok.encode(t) for t in ("1+1=", "what is two plus two, exactly?", "hi",
                                       "a much longer question about numbers", "x", "7*6=")]
    responses = [tok.encode(t) for t in (" 2", " four, it is four", " hello there", " 12",
                                         " y y y y y y", " 42")]
    width, n = max(map(len, responses)), len(prompts)
    mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in responses])
    g = torch.Generator().manual_seed(0)
    exp = Experience(keys=pa.table({"k": list(range(n))}), prompts=prompts,
                     responses=responses, old_logp=-torch.rand(n, width, generator=g) * mask,
                     ref_logp=None, mask=mask, reward=torch.zeros(n), values=None)
    adv = torch.randn(n, width, generator=g) * mask
    return exp, Advantages(advantages=adv, returns=adv, kept=torch.ones(n), seq_kl=None,
                           metrics={})


def _step(model, tok, exp, adv, max_tokens: int | None) -> GradTrainer:
    settings = LearnSettings(algo=AlgoConfig(kl=KLConfig(init_coef=0.0)), actor=ActorConfig(),
                             critic=CriticConfig(), reward=RLRewardConfig(),
                             train=TrainConfig(batch_size=6, micro_batch_size=2), packing=False,
                             n_samples=2, temperature=1.0, max_len=16, max_tokens=max_tokens)
    counts = minibatch.Counts.of(exp.mask, adv.kept, lengths(exp), max_len=16)
    penalty = KLPenalty.of(settings.algo.kl, None)

    def make_loss(mb):
        return learn._actor_loss(exp, adv, settings, penalty, tok.pad_token_id,
                                 lambda idx: counts.norm(mb, idx), 0)
    trainer = GradTrainer(model)
    minibatch.train_steps(trainer, minibatch.plan(0, 6, settings), settings, counts, make_loss)
    return trainer


def test_a_step_by_token_budget_has_the_loss_and_gradient_of_fixed_micro_batches(
        tiny_model_dir):
    tok = load_tokenizer(str(tiny_model_dir))
    model = load_causal_lm(str(tiny_model_dir))
    exp, adv = _experience(tok)
    fixed = _step(model, tok, exp, adv, None)
    budget = _step(model, tok, exp, adv, 24)
    assert sorted(map(len, fixed.batches)) != sorted(map(len, budget.batches))
    assert all(sum(lengths(exp)[i] for i in b) <= 24 or len(b) == 1 for b in budget.batches)
    config, tokens = model.config, int(exp.mask.sum())
    bound = network_bound(config, float(exp.old_logp.abs().max()) + 1) * float(
        adv.advantages.abs().max()) * 2  # |Δℓ| ≤ |A|·ρ·|Δ log p|, ρ ≤ e^1 within the clip
    assert abs(fixed.loss - budget.loss) <= bound
    for name, g in fixed.grads.items():
        assert torch.allclose(budget.grads[name], g, rtol=0,
                              atol=gradient_bound(config, tokens, g)), name


def test_inference_by_token_budget_gives_the_same_log_probs(tiny_model_dir):
    tok = load_tokenizer(str(tiny_model_dir))
    model = load_causal_lm(str(tiny_model_dir))
    exp, _ = _experience(tok)
    common = dict(packed=False, pad_id=tok.pad_token_id, temperature=1.0)
    fixed = proximal_logprobs(model, exp.prompts, exp.responses, micro_batch=2, **common)
    budget = proximal_logprobs(model, exp.prompts, exp.responses, micro_batch=2,
                               max_tokens=20, **common)
    assert torch.allclose(fixed, budget, rtol=0,
                          atol=network_bound(model.config, float(fixed.abs().max())))
