"""Checkpoints: an AdamW run saved, reloaded into fresh objects and continued ends bitwise
equal to the uninterrupted run."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from alignflow.artifacts import checkpoints, read_table
from alignflow.errors import SchemaError

torch.set_num_threads(1)


class _Net(torch.nn.Module):
    """Two layers plus a head tied to the second (shared storage, like tied embeddings)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.out, self.head = (torch.nn.Linear(8, 16), torch.nn.Linear(16, 4),
                                         torch.nn.Linear(16, 4, bias=False))
        self.head.weight = self.out.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.inp(x))
        return self.out(h) + 0.5 * self.head(h)


def _make(seed: int = 0):
    torch.manual_seed(seed)
    model = _Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.8, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return model, opt, sched


def _train(model, opt, sched, steps: int) -> None:
    for _ in range(steps):
        x = torch.randn(5, 8)  # draws from the global RNG: it must be restored too
        noise = float(np.random.rand()) + random.random()
        loss = ((model(x) - noise) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


def test_adamw_resume_is_bitwise(fast_store):
    model, opt, sched = _make()
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    _train(model, opt, sched, 3)
    nbytes = checkpoints.save(fast_store, "runs/r/checkpoints/policy-3", model.state_dict(),
                              optimizer=opt, scheduler=sched, extra={"step": 3})
    _train(model, opt, sched, 4)
    expected = {k: v.clone() for k, v in model.state_dict().items()}

    torch.manual_seed(99), np.random.seed(99), random.seed(99)  # scramble the RNGs
    ck = checkpoints.load(fast_store, "runs/r/checkpoints/policy-3")
    assert ck.bytes == nbytes and ck.extra == {"step": 3}
    model2, opt2, sched2 = _make(seed=42)
    model2.load_state_dict(ck.model_state)
    opt2.load_state_dict(ck.optimizer_state)
    sched2.load_state_dict(ck.scheduler_state)
    ck.restore_rng()
    assert opt2.param_groups[0]["betas"] == (0.8, 0.95)
    _train(model2, opt2, sched2, 4)
    for name, value in model2.state_dict().items():
        assert torch.equal(value, expected[name]), name
    assert sched2.get_last_lr() == sched.get_last_lr()


def test_state_files_are_not_pickles(fast_store):
    model, opt, _ = _make()
    checkpoints.save(fast_store, "ck", model.state_dict(), optimizer=opt)
    assert sorted(fast_store.list("ck")) == ["ck/meta.json", "ck/model.safetensors",
                                             "ck/state.json", "ck/state.safetensors"]
    for rel in fast_store.list("ck"):
        assert not fast_store.read_bytes(rel).startswith(b"\x80")  # pickle protocol marker


def test_unfinished_checkpoint_refused(fast_store):
    fast_store.write_bytes("ck/model.safetensors", b"partial")
    with pytest.raises(SchemaError, match=r"ck: no meta.json"):
        checkpoints.load(fast_store, "ck")


def test_unpicklable_extra_refused(fast_store):
    with pytest.raises(SchemaError, match=r"extra/fn: cannot store a function"):
        checkpoints.save(fast_store, "ck", {}, rng=False, extra={"fn": _make})


def test_index_row(fast_store):
    ref = checkpoints.write_index(fast_store, run_id="r", task_key="iter-0004/learn", step=4,
                                  path="runs/r/checkpoints/policy-4", kind="policy",
                                  policy_version=4, nbytes=1234)
    assert ref.path.startswith("runs/r/checkpoints/iter=4/iter-0004-learn-")
    row = read_table(fast_store, [ref]).to_pylist()[0]
    assert {k: row[k] for k in ("step", "kind", "policy_version", "bytes")} == {
        "step": 4, "kind": "policy", "policy_version": 4, "bytes": 1234}
