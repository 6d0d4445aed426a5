"""The batched inverse-CDF draw: right distribution, never a zero-probability token, and
a row's draws do not depend on the other rows of its batch."""

import torch

from alignflow.tasks.engines.sampling import RowStreams, draw


def test_draw_follows_the_distribution():
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3]])
    streams = RowStreams(0, [(0, 0)])
    counts = torch.zeros(4)
    for _ in range(20000):
        counts[draw(probs, streams.uniforms())] += 1
    assert counts[1] == 0
    assert torch.allclose(counts / counts.sum(), probs[0], atol=0.015)


def test_edges_pick_the_first_and_last_possible_token():
    probs = torch.tensor([[0.0, 0.5, 0.5, 0.0], [0.0, 0.5, 0.5, 0.0]])
    tokens = draw(probs, torch.tensor([0.0, 1.0 - 2**-53], dtype=torch.float64))
    assert tokens.tolist() == [1, 2]


def test_unnormalised_weights_are_fine():
    weights = torch.tensor([[2.0, 0.0, 6.0]])
    assert draw(weights, torch.tensor([0.3], dtype=torch.float64)).tolist() == [2]
    assert draw(weights, torch.tensor([0.2], dtype=torch.float64)).tolist() == [0]


def test_rows_draw_the_same_alone_or_batched():
    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(6, 50), dim=-1)
    rows = [(p, s) for p in range(3) for s in range(2)]
    batched, alone = RowStreams(9, rows), [RowStreams(9, [r]) for r in rows]
    for _ in range(20):
        together = draw(probs, batched.uniforms()).tolist()
        one_by_one = [draw(probs[i : i + 1], a.uniforms()).item() for i, a in enumerate(alone)]
        assert together == one_by_one
