"""Sample packing: the plan respects the budget, and a packed step equals a padded step."""

import pytest
import torch

from alignflow.artifacts.tensors import pad_left, pad_right
from alignflow.errors import ConfigError
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.modeling.logprobs import packed_sequence_logprobs, sequence_logprobs
from alignflow.tasks.modeling.packing import plan_packed_micro_batches
from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer
from tests.tolerance import gradient_bound, network_bound

torch.set_num_threads(1)

PROMPTS = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14], [15, 16, 17], [18, 19]]
RESPONSES = [[20, 21], [22, 23, 24], [25], [26, 27, 28, 29], [30, 31], [32]]


def test_plan_by_hand():
    assert plan_packed_micro_batches([5, 3, 4, 2, 6], 8) == [[3, 4], [0, 1], [2]]
    with pytest.raises(ConfigError, match="9 tokens exceeds max_tokens=8"):
        plan_packed_micro_batches([9, 1], 8)


def _padded_loss(model, batch):
    idx = batch["idx"]
    p_ids, p_mask = pad_left([PROMPTS[i] for i in idx], 0)
    r_ids, r_mask = pad_right([RESPONSES[i] for i in idx], 0)
    lp = sequence_logprobs(model, torch.cat([p_ids, r_ids], 1), torch.cat([p_mask, r_mask], 1),
                           r_ids.shape[1])
    return -(lp * r_mask).sum() / len(PROMPTS), {}


def _packed_loss(model, batch):
    idx = batch["idx"]
    lp = packed_sequence_logprobs(model, [PROMPTS[i] + RESPONSES[i] for i in idx],
                                  [len(RESPONSES[i]) for i in idx])
    return -torch.cat(lp).sum() / len(PROMPTS), {}


def test_packed_step_equals_padded_step(tiny_model_dir):
    """Sum-of-logprob loss over all samples; padded: 3 x 2 rows, packed: budget of 10 tokens."""
    cfg = TrainerConfig(lr=1e-3, lr_warmup_ratio=0.0, max_norm=0.0, total_steps=2)
    padded = TorchTrainer(load_causal_lm(str(tiny_model_dir)), cfg)
    packed = TorchTrainer(load_causal_lm(str(tiny_model_dir)), cfg)
    lengths = [len(p) + len(r) for p, r in zip(PROMPTS, RESPONSES, strict=True)]
    plan = plan_packed_micro_batches(lengths, 10)
    assert len(plan) == 3 and sorted(i for g in plan for i in g) == list(range(6))
    ones = [1.0] * 3  # the losses are already sums over the whole batch
    ma = padded.step([{"idx": [0, 1]}, {"idx": [2, 3]}, {"idx": [4, 5]}], _padded_loss, weights=ones)
    mb = packed.step([{"idx": g} for g in plan], _packed_loss, weights=ones)
    config, tokens = padded.model.config, sum(lengths)  # bounds: tests/tolerance.py
    assert ma["loss"] == pytest.approx(mb["loss"], abs=network_bound(config, ma["loss"]))
    assert ma["grad_norm"] == pytest.approx(mb["grad_norm"], rel=1e-5)
    for pa, pb in zip(padded.model.parameters(), packed.model.parameters(), strict=True):
        ga, gb = (t.optimizer.state[p]["exp_avg"] / 0.1 for t, p in ((padded, pa), (packed, pb)))
        torch.testing.assert_close(ga, gb, atol=gradient_bound(config, tokens, ga), rtol=0)
