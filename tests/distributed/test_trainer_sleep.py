"""Trainer sleep under DeepSpeed moves every state tensor off the trainer's device (issue 21
§3.6: moving the module alone left ZeRO's flat buffers, fp32 master weights and Adam moments
on the GPU, so sleep freed nothing), and wake brings them back unchanged.

There is no GPU here, so "the device" is faked: during the sleep every move to the host
is made a real copy (`Tensor.to(..., copy=True)`), and a state tensor still in a storage it
had before the sleep is one the sleep left on the device. The census walks everything the
engine holds — the module's parameters and gradients (ZeRO-3 partitions too), the ZeRO
optimizer's buffers, the inner optimizer's state — and counts those bytes."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("deepspeed")
pytestmark = pytest.mark.slow

SCALAR_BYTES = 4  # AdamW's step counter, one per parameter tensor, stays (a CPU scalar)


def _trainer(model_dir, stage: int | None, dtype: str = "fp32"):
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.build import build_trainer
    from alignflow.tasks.trainers.deepspeed.section import DSConfig

    torch.manual_seed(0)
    ds = DSConfig() if stage is None else DSConfig(zero_stage=stage)
    cfg = TrainerConfig(lr=1e-2, total_steps=4, dtype=dtype)
    return build_trainer(load_causal_lm(model_dir), cfg, ds)


def _loss(model, ids):
    return model(input_ids=ids, labels=ids, use_cache=False).loss, {}


def _step(trainer, seed: int) -> float:
    ids = torch.randint(4, 500, (2, 8), generator=torch.Generator().manual_seed(seed))
    return trainer.step([ids], _loss)["loss"]


def state_tensors(trainer) -> list[torch.Tensor]:
    """Every tensor the trainer holds (deduplicated by object)."""
    engine = getattr(trainer, "engine", None)
    found, seen = [], set()

    def visit(obj, depth: int = 0) -> None:
        if obj is None or id(obj) in seen or depth > 6:
            return
        seen.add(id(obj))
        if torch.is_tensor(obj):
            if obj.device.type != "meta" and obj.nelement():
                found.append(obj)
            visit(getattr(obj, "ds_tensor", None), depth + 1)
        elif isinstance(obj, dict):
            for value in obj.values():
                visit(value, depth + 1)
        elif isinstance(obj, list | tuple | set):
            for value in obj:
                visit(value, depth + 1)
    for p in trainer.model.parameters():
        visit(p)
        visit(p.grad)
    masters = getattr(trainer, "masters", None)
    visit(masters.params if masters is not None else None)
    optimizer = getattr(trainer, "optimizer", None) or engine.optimizer
    visit(vars(optimizer))
    visit(getattr(optimizer, "optimizer", optimizer).state)
    return found


def _left_on_device(trainer) -> tuple[int, int]:
    """(bytes of state before the sleep, bytes the sleep left where they were)."""
    from alignflow.tasks.trainers.sleep import sleep_trainer

    before = {t.untyped_storage().data_ptr(): t.untyped_storage() for t in state_tensors(trainer)}
    to = torch.Tensor.to

    def copying_to(self, *args, **kwargs):
        kwargs.pop("copy", None)
        return to(self, *args, copy=True, **kwargs)
    torch.Tensor.to = copying_to
    try:
        sleep_trainer(trainer)
    finally:
        torch.Tensor.to = to
    left = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
            for t in state_tensors(trainer) if t.untyped_storage().data_ptr() in before}
    return sum(s.nbytes() for s in before.values()), sum(left.values())


@pytest.mark.parametrize(("stage", "dtype"), [(None, "fp32"), (None, "bf16"), (2, "fp32"),
                                              (3, "fp32"), (2, "bf16")])
def test_sleep_moves_every_state_tensor_off_the_device(tiny_model_dir, stage, dtype):
    trainer = _trainer(tiny_model_dir, stage, dtype)
    _step(trainer, 0)  # Adam moments exist
    scalars = SCALAR_BYTES * (len(list(trainer.model.parameters())) + 16)
    total, left = _left_on_device(trainer)
    assert total > 1_000_000 and left <= scalars, (total, left)


@pytest.mark.parametrize("stage", [2, 3])
def test_a_trainer_woken_from_sleep_steps_as_if_it_never_slept(tiny_model_dir, stage):
    from alignflow.tasks.trainers.sleep import sleep_trainer, wake_trainer

    awake, slept = _trainer(tiny_model_dir, stage), _trainer(tiny_model_dir, stage)
    for seed in range(3):
        sleep_trainer(slept)
        wake_trainer(slept, "cpu")  # the trainer's device here
        assert _step(slept, seed) == _step(awake, seed)
    for (name, a), (_, b) in zip(awake.state_dict_for_sync(), slept.state_dict_for_sync(),
                                 strict=True):
        assert torch.equal(a, b), name
