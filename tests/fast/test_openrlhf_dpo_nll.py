"""DPO's NLL term (`model.nll_loss_coef`, OpenRLHF's `--nll_loss_coef`) against OpenRLHF
v0.11.0 `trainer/dpo_trainer.py` (the same from v0.5): `concatenated_forward` returns
nll = −mean_b(Σ_t logp_c / |y_c|) over the chosen responses, and the loss is
DPO + nll_loss_coef · nll (only when nll_loss_coef > 1e-8)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from alignflow.flows.cli.run_config import build_config
from alignflow.tasks.losses import chosen_nll
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.offline.batches import response_logps
from alignflow.tasks.offline.config import TrainSpec
from alignflow.tasks.offline.loss_config import DPOModelConfig
from alignflow.tasks.offline.objectives import Context, dpo

torch.set_num_threads(1)


def test_two_rows_by_hand():
    # summed log-probs −3 over 2 tokens and −1 over 4: mean NLLs 1.5 and 0.25
    assert chosen_nll(torch.tensor([-3.0, -1.0]), torch.tensor([2, 4])).tolist() == [1.5, 0.25]


def openrlhf_dpo_nll(pi_c, pi_r, ref_c, ref_r, n_c, beta, coef):
    logits = (pi_c - pi_r) - (ref_c - ref_r)
    dpo_loss = (-F.logsigmoid(beta * logits)).mean()
    nll = -(pi_c / n_c).mean()
    return dpo_loss + (nll * coef if coef > 1e-8 else 0)


@pytest.mark.parametrize("coef", [0.0, 0.5])
def test_the_dpo_objective_adds_the_chosen_responses_nll(tiny_model_dir, coef):
    tok = load_tokenizer(str(tiny_model_dir))
    model = load_causal_lm(str(tiny_model_dir))
    enc = [tok.encode(t) for t in ("q: 1+1?", "q: the sky is", "a: 2", "a: blue and wide",
                                   "a: 3", "a: green")]
    ex = {"input_ids": enc[:2], "chosen_ids": enc[2:4], "rejected_ids": enc[4:]}
    ref = {"chosen": torch.tensor([-20.0, -30.0]), "rejected": torch.tensor([-25.0, -28.0])}
    spec = TrainSpec(kind="dpo", loss=DPOModelConfig(beta=0.1, nll_loss_coef=coef),
                     train_batch_size=2, micro_train_batch_size=2, save_steps=1, eval_steps=1)
    with torch.no_grad():
        out = dpo(model, [0, 1], Context(ex, tok.pad_token_id, spec, ref), 2.0)
        pi = response_logps(model, ex["input_ids"] * 2, ex["chosen_ids"] + ex["rejected_ids"],
                            tok.pad_token_id)
    pi_c, pi_r = pi.split(2)
    expected = openrlhf_dpo_nll(pi_c, pi_r, ref["chosen"], ref["rejected"],
                                torch.tensor([len(c) for c in ex["chosen_ids"]]), 0.1, coef)
    assert float(out.loss) == pytest.approx(float(expected), rel=1e-6)
    assert ("nll_loss" in out.metrics) == (coef > 0)


def test_the_flag_of_every_release_and_its_range():
    for flags in (["--nll_loss_coef", "0.2"], ["--model.nll_loss_coef", "0.2"]):
        assert build_config("dpo", None, [], flags).model.nll_loss_coef == 0.2
    with pytest.raises(Exception, match="nll_loss_coef"):
        build_config("dpo", None, ["model.nll_loss_coef=-1"], [])


def test_the_eval_loss_leaves_the_nll_out(tiny_model_dir):
    """OpenRLHF's DPO evaluate computes the preference loss only."""
    from alignflow.tasks.offline.kinds import objective

    tok = load_tokenizer(str(tiny_model_dir))
    model = load_causal_lm(str(tiny_model_dir))
    ex = {"input_ids": [tok.encode("q: hi")], "chosen_ids": [tok.encode("a: yes")],
          "rejected_ids": [tok.encode("a: no")]}
    ref = {"chosen": torch.tensor([-9.0]), "rejected": torch.tensor([-9.5])}

    def loss(fn, coef):
        spec = TrainSpec(kind="dpo", loss=DPOModelConfig(nll_loss_coef=coef),
                         train_batch_size=1, micro_train_batch_size=1, save_steps=1,
                         eval_steps=1)
        with torch.no_grad():
            return float(fn(model, [0], Context(ex, tok.pad_token_id, spec, ref), 1.0).loss)
    assert loss(objective("dpo").eval_loss, 0.7) == loss(dpo, 0.0) != loss(dpo, 0.7)
