"""Gradient checkpointing for every model type a trainer holds: the causal LM and the value
head model (PPO's critic, the reward model of the `rm` flow), which once crashed with
"'Critic' object has no attribute 'gradient_checkpointing_enable'"."""

import pytest
import torch

from alignflow.tasks.modeling.critic import Critic
from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer

torch.set_num_threads(1)
CFG = dict(lr=1e-2, lr_warmup_ratio=0.0, min_lr_ratio=1.0, total_steps=10)


def _value_loss(model, batch):
    ids = batch["input_ids"]
    values = model(ids, torch.ones_like(ids), 4)
    return ((values - 1.0) ** 2).mean(), {}


def _trainer(path: str, checkpointing: bool) -> TorchTrainer:
    torch.manual_seed(0)  # a causal LM's value head is initialised fresh
    return TorchTrainer(Critic.from_pretrained(path),
                        TrainerConfig(**CFG, gradient_checkpointing=checkpointing))


@pytest.mark.parametrize("folder", ["tiny_model_dir", "tiny_rm_dir"])
def test_critic_checkpointing_gives_the_same_step(folder, request):
    path = str(request.getfixturevalue(folder))
    ids = torch.randint(4, 512, (4, 10), generator=torch.Generator().manual_seed(0))
    plain, checkpointed = (_trainer(path, flag) for flag in (False, True))
    assert checkpointed.model.model.is_activation_checkpointing
    assert not plain.model.model.is_activation_checkpointing
    a, b = (t.step([{"input_ids": ids}], _value_loss) for t in (plain, checkpointed))
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)
    for pa, pb in zip(plain.model.parameters(), checkpointed.model.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=0)
