"""The PPO ratio is clamped as OpenRLHF 0.11 clamps it, and a non-finite loss stops the
learn step before any update, naming the iteration and the values."""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch

from alignflow.tasks.losses import policy_loss
from alignflow.tasks.losses.policy import importance_ratio
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.rl import learn, minibatch
from alignflow.tasks.rl.experience import Advantages, Experience
from alignflow.tasks.rl.finite import NonFiniteLoss, check_finite
from alignflow.tasks.rl.kl_penalty import KLPenalty
from alignflow.tasks.rl.learn_config import AlgoConfig, KLConfig, LearnSettings, RLRewardConfig
from alignflow.tasks.rl.roles import ActorConfig, CriticConfig
from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.optim import TrainConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer

torch.set_num_threads(1)


def test_log_ratio_is_clamped_at_20_both_ways():
    logp = torch.tensor([100.0, -100.0, 19.0, 0.5])
    ratio = importance_ratio(logp, torch.zeros(4))
    assert torch.isfinite(ratio).all()
    assert ratio.tolist() == pytest.approx([torch.exp(torch.tensor(20.0)).item(),
                                            torch.exp(torch.tensor(-20.0)).item(),
                                            torch.exp(torch.tensor(19.0)).item(),
                                            torch.exp(torch.tensor(0.5)).item()], rel=1e-6)


@pytest.mark.parametrize("name", ["ppo", "dual_clip"])
def test_garbage_log_probs_give_a_finite_loss_and_gradient_in_float32(name):
    """A token whose probability moved by e^100 (or garbage on padding) used to make the
    float32 ratio inf and the masked loss NaN (inf · 0)."""
    logp = torch.tensor([[90.0, 0.1], [-90.0, 1e4]], requires_grad=True)
    old = torch.zeros(2, 2)
    adv = torch.tensor([[-1.0, -1.0], [-1.0, 2.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # 1e4 sits on padding
    loss, metrics = policy_loss(logp, old, adv, mask, name=name)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert all(torch.isfinite(v) for v in metrics.values())
    assert logp.grad[0, 0] == 0 and logp.grad[1, 1] == 0  # clamped / padding: no gradient


def test_check_finite_names_iteration_micro_batch_and_values():
    logp = torch.tensor([[-1.0, float("nan")], [-2.0, -3.0]])
    mask = torch.ones(2, 2)
    with pytest.raises(NonFiniteLoss) as info:
        check_finite(torch.tensor(float("nan")), iteration=7, what="policy", samples=[4, 5],
                     parts={"policy loss": torch.tensor(float("nan")), "log-probs": logp},
                     mask=mask)
    text = str(info.value)
    assert text.startswith("iteration 7: the policy loss is nan on a micro-batch of 2 "
                           "(samples 4..5); policy loss nan, log-probs [-3, -1] (1 not finite)")
    assert "\n" not in text and info.value.kind == "user"
    check_finite(torch.tensor(0.5), iteration=7, what="policy", samples=[], parts={})


def _experience(n: int, tokenizer, advantage: float) -> tuple[Experience, Advantages]:
    prompts = [tokenizer.encode("1+1=")] * n
    responses = [tokenizer.encode(" 2")] * n
    width = max(len(r) for r in responses)
    zeros = torch.zeros(n, width)
    exp = Experience(keys=pa.table({"k": list(range(n))}), prompts=prompts, responses=responses,
                     old_logp=zeros, ref_logp=zeros, mask=torch.ones(n, width),
                     reward=torch.zeros(n), values=None)
    adv = torch.full((n, width), advantage)
    return exp, Advantages(advantages=adv, returns=adv, kept=torch.ones(n), seq_kl=torch.zeros(n),
                           metrics={})


def test_a_nan_advantage_stops_the_learn_step_before_any_update(tiny_model_dir):
    tokenizer = load_tokenizer(str(tiny_model_dir))
    trainer = TorchTrainer(load_causal_lm(str(tiny_model_dir)), TrainerConfig(
        lr=1e-2, lr_warmup_ratio=0.0, min_lr_ratio=1.0, total_steps=10, max_norm=1.0))
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    settings = LearnSettings(algo=AlgoConfig(), actor=ActorConfig(), critic=CriticConfig(),
                             reward=RLRewardConfig(), train=TrainConfig(batch_size=4,
                                                                        micro_batch_size=2),
                             packing=False, n_samples=2, temperature=1.0, max_len=8)
    exp, adv = _experience(4, tokenizer, float("nan"))
    penalty = KLPenalty.of(KLConfig(), None)

    counts = minibatch.Counts.of(exp.mask, adv.kept, [3] * 4, max_len=8)

    def make_loss(mb):
        return learn._actor_loss(exp, adv, settings, penalty, tokenizer.pad_token_id,
                                 lambda idx: counts.norm(mb, idx), 3)

    with pytest.raises(NonFiniteLoss, match=r"^iteration 3: the policy loss is nan on a "
                                            r"micro-batch of 2 .*advantages \[\] \(\d+ not finite"):
        minibatch.train_steps(trainer, minibatch.plan(0, 4, settings), settings, counts,
                              make_loss)
    after = trainer.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert trainer.global_step == 0
