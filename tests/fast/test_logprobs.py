"""Logprobs of response tokens: padded vs packed vs a slow per-sequence loop; critic values."""

import pytest
import torch

from alignflow.artifacts.tensors import pack
from alignflow.artifacts.tensors import pad_left as left_pad
from alignflow.tasks.modeling.critic import Critic
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.modeling.logprobs import (
    packed_sequence_logprobs,
    sequence_logprobs,
    token_logprobs,
)
from tests.tolerance import network_bound

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def lm_dir(tiny_model_dir):
    return tiny_model_dir


@pytest.fixture(scope="module")
def lm(lm_dir):
    return load_causal_lm(str(lm_dir))


SEQS = [[5, 9, 30, 41, 7, 8], [11, 12, 13], [100, 200, 300, 400, 17, 18, 19, 20, 21]]
NUM_ACTIONS = [2, 1, 4]


def _alone(model, seq, n, temperature=1.0):
    """Slow reference: one unpadded sequence at a time, full log-softmax."""
    logits = model(input_ids=torch.tensor([seq])).logits[0].float() / temperature
    lp = torch.log_softmax(logits, -1)[:-1].gather(-1, torch.tensor(seq[1:])[:, None])[:, 0]
    return lp[-n:]


def _padded(model, seqs, num_actions, temperature=1.0):
    """Rows = [left-padded prompt | response right-padded]: the layout generation produces."""
    width = max(num_actions)
    prompts = [s[: len(s) - n] for s, n in zip(seqs, num_actions, strict=True)]
    p_ids, p_mask = left_pad(prompts, 0)
    r_ids = torch.zeros(len(seqs), width, dtype=torch.long)
    r_mask = torch.zeros_like(r_ids)
    for i, (s, n) in enumerate(zip(seqs, num_actions, strict=True)):
        r_ids[i, :n] = torch.tensor(s[len(s) - n :])
        r_mask[i, :n] = 1
    ids, mask = torch.cat([p_ids, r_ids], 1), torch.cat([p_mask, r_mask], 1)
    return sequence_logprobs(model, ids, mask, width, temperature=temperature), r_mask


def test_token_logprobs_matches_log_softmax_by_hand():
    logits = torch.tensor([[[0.0, 1.0, 2.0]]])
    got = token_logprobs(logits, torch.tensor([[2]]), temperature=2.0)
    expected = 1.0 - torch.logsumexp(torch.tensor([0.0, 0.5, 1.0]), 0)
    assert torch.allclose(got, expected.reshape(1, 1), atol=1e-7)


def _tol(lm) -> float:
    """Two batchings of one forward differ by rounding: tests/tolerance.py."""
    with torch.no_grad():
        biggest = max(float(lm(torch.tensor([s])).logits.abs().max()) for s in SEQS)
    return network_bound(lm.config, biggest)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_padded_logprobs_equal_unpadded_loop(lm, temperature):
    with torch.no_grad():
        padded, r_mask = _padded(lm, SEQS, NUM_ACTIONS, temperature)
        for i, (s, n) in enumerate(zip(SEQS, NUM_ACTIONS, strict=True)):
            torch.testing.assert_close(padded[i, :n], _alone(lm, s, n, temperature),
                                       atol=_tol(lm), rtol=0)
    assert padded.shape == (3, 4) and padded.dtype == torch.float32


def test_packed_logprobs_equal_padded(lm):
    with torch.no_grad():
        packed = packed_sequence_logprobs(lm, SEQS, NUM_ACTIONS)
        padded, _ = _padded(lm, SEQS, NUM_ACTIONS)
    assert [len(p) for p in packed] == NUM_ACTIONS
    for i, n in enumerate(NUM_ACTIONS):
        torch.testing.assert_close(packed[i], padded[i, :n], atol=_tol(lm), rtol=0)


def test_packed_sequences_do_not_see_each_other(lm):
    """Changing the first sequence leaves the second's logprobs bitwise-close to alone."""
    with torch.no_grad():
        a = packed_sequence_logprobs(lm, [[1, 2, 3], SEQS[2]], [1, 4])[1]
        b = packed_sequence_logprobs(lm, [[400, 401, 402, 403, 404], SEQS[2]], [1, 4])[1]
    torch.testing.assert_close(a, b, atol=_tol(lm), rtol=0)


def test_pack_layout():
    ids, pos, cu = pack([[7, 8], [9], [1, 2, 3]])
    assert ids.tolist() == [[7, 8, 9, 1, 2, 3]]
    assert pos.tolist() == [[0, 1, 0, 0, 1, 2]]
    assert cu.tolist() == [0, 2, 3, 6]


def test_logprobs_backpropagate(lm_dir):
    model = load_causal_lm(str(lm_dir)).train()
    lp = packed_sequence_logprobs(model, SEQS, NUM_ACTIONS)
    torch.cat(lp).sum().backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0


@pytest.fixture(scope="module")
def rm_dir(tiny_rm_dir):
    return tiny_rm_dir


def test_critic_from_reward_model_keeps_head_and_scores(rm_dir):
    from transformers import AutoModelForSequenceClassification

    rm = AutoModelForSequenceClassification.from_pretrained(str(rm_dir))
    critic = Critic.from_pretrained(str(rm_dir))
    assert torch.equal(critic.model.score.weight, rm.score.weight)
    ids = torch.tensor([[5, 9, 30, 41, 7, 8]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        values = critic.token_values(ids, mask)
        score = rm(input_ids=ids, attention_mask=mask).logits[0, 0]
        per_action = critic(ids, mask, num_actions=2)
    assert values.shape == (1, 6) and per_action.shape == (1, 2)
    torch.testing.assert_close(values[0, -1], score, atol=1e-5, rtol=0)
    torch.testing.assert_close(per_action[0], values[0, 3:5], atol=0, rtol=0)


def test_critic_from_policy_gets_fresh_head(lm_dir):
    critic = Critic.from_pretrained(str(lm_dir))
    assert critic.model.score.weight.shape == (1, 64)
    with torch.no_grad():
        v = critic(torch.tensor([[1, 2, 3, 4]]), torch.ones(1, 4, dtype=torch.long), 2)
    assert v.shape == (1, 2) and torch.isfinite(v).all()
