"""The reward model's margin loss (`model.margin_loss_enable`, OpenRLHF's `--margin_loss`)
against OpenRLHF v0.11.0 (`datasets/reward_dataset.py`: margin = data["margin"] when present
and not None, else 0; `models/loss.py`: PairWiseLoss −log σ(r_c − r_r − m), mean over pairs;
LogExpLoss log(1 + e^(r_r − r_c)) takes no margin)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from alignflow.flows.cli.run_config import build_config
from alignflow.tasks.modeling.critic import Critic
from alignflow.tasks.modeling.loading import load_tokenizer
from alignflow.tasks.offline.config import TrainSpec
from alignflow.tasks.offline.loss_config import RMModelConfig
from alignflow.tasks.offline.objectives import Context, rm

torch.set_num_threads(1)


def openrlhf_rm_loss(r_c, r_r, margins, loss_type, margin_loss):
    if loss_type == "logexp":
        return torch.log(1 + torch.exp(r_r - r_c)).mean()
    m = torch.tensor([x if x is not None else 0 for x in margins]) if margin_loss else None
    return (-F.logsigmoid(r_c - r_r - m) if m is not None
            else -F.logsigmoid(r_c - r_r)).mean()


@pytest.mark.parametrize(("loss_type", "margin_loss"), [
    ("sigmoid", True), ("sigmoid", False), ("logexp", True)])
def test_each_pair_takes_its_own_margin(tiny_rm_dir, loss_type, margin_loss):
    tok = load_tokenizer(str(tiny_rm_dir))
    model = Critic.from_pretrained(str(tiny_rm_dir))
    enc = [tok.encode(t) for t in ("q: 1+1?", "q: sky?", "a: 2", "a: blue", "a: 3", "a: red")]
    margins = [2.0, None]
    ex = {"input_ids": enc[:2], "chosen_ids": enc[2:4], "rejected_ids": enc[4:],
          "margin": margins}
    spec = TrainSpec(kind="rm", loss=RMModelConfig(loss_type=loss_type,
                                                   margin_loss_enable=margin_loss),
                     train_batch_size=2, micro_train_batch_size=2, save_steps=1, eval_steps=1)
    with torch.no_grad():
        out = rm(model, [0, 1], Context(ex, tok.pad_token_id, spec), 2.0)
    r_c = torch.tensor(out.per_example["chosen_score"])
    r_r = torch.tensor(out.per_example["rejected_score"])
    expected = openrlhf_rm_loss(r_c, r_r, margins, loss_type, margin_loss)
    assert float(out.loss) == pytest.approx(float(expected), rel=1e-5)


def test_the_flag_of_every_release():
    for flags in (["--margin_loss"], ["--model.margin_loss_enable"]):
        assert build_config("rm", None, [], flags).model.margin_loss_enable
