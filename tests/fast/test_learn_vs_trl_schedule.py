"""`bench/learn_vs_trl.py` (issue 43) gives TRL the learning rate alignflow's trainer steps
with, step by step: both build OpenRLHF's `cosine_with_min_lr`. (Once, alignflow's schedule
was one step further on — transformers' `_lr_rate` variant — ≈ 19% less lr summed over the
8-step run the bench first measured, and TRL was given that variant to match.) The TRL side
is what HF's Trainer builds from the bench's arguments (`transformers.get_scheduler`);
alignflow's is its trainer."""

from __future__ import annotations

import pytest
import torch
from transformers import get_scheduler

from alignflow.tasks.trainers.torch_trainer import TorchTrainer
from bench.learn_vs_trl_sides import settings, trl_args


def _alignflow_lrs(cfg) -> list[float]:
    """The lr of each optimizer step of alignflow's trainer over the run's schedule."""
    steps = cfg.optimizer_steps(cfg.train.max_iterations)
    trainer = TorchTrainer(torch.nn.Linear(2, 1), cfg.actor.trainer_config(steps, cfg.train, cfg.ds))
    x = torch.ones(1, 2)
    return [trainer.step([{"x": x}], lambda m, b: (m(b["x"]).sum(), {}))["lr"]
            for _ in range(steps)]


def _trl_lrs(args: dict) -> list[float]:
    """The lr of each step of the schedule HF's Trainer builds from TRL's arguments."""
    opt = torch.optim.AdamW(torch.nn.Linear(2, 1).parameters(), lr=args["learning_rate"])
    sched = get_scheduler(args["lr_scheduler_type"], opt, num_warmup_steps=args["warmup_steps"],
                          num_training_steps=args["max_steps"],
                          scheduler_specific_kwargs=args["lr_scheduler_kwargs"])
    lrs = []
    for _ in range(args["max_steps"]):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


@pytest.mark.parametrize("extra", [[], ["actor.lr_warmup_ratio=0.2", "actor.min_lr_ratio=0.3"]])
@pytest.mark.parametrize("iterations", [4, 8])
def test_trl_steps_with_alignflows_learning_rates(tmp_path, iterations, extra):
    cfg = settings("smollm2-135m", iterations, 1, extra)
    args = trl_args(cfg, 1, tmp_path)
    ours, theirs = _alignflow_lrs(cfg), _trl_lrs(args)
    assert len(ours) == len(theirs) == args["max_steps"] == 2 * iterations
    assert theirs == pytest.approx(ours, rel=1e-12)  # one formula, float64 on both sides
    peak, floor = cfg.actor.adam.lr, cfg.actor.adam.lr * cfg.actor.min_lr_ratio
    assert ours[0] == (0.0 if args["warmup_steps"] else peak)  # OpenRLHF's: i / warmup
    assert floor < ours[-1] < ours[-2]  # the floor is reached after the last step


@pytest.mark.parametrize("stop", ["\n", "3"])
def test_trl_stops_where_alignflows_engine_stops(tiny_model_dir, stop):
    """TRL ends a response at its EOS ids; the bench adds every token whose text holds the
    stop: after any prefix that has not stopped, a token stops TRL iff it stops the HF
    engine's `StopChecker` (`rollout.stop`), so both sides keep the same tokens."""
    from transformers import AutoTokenizer

    from alignflow.tasks.engines.sampling import StopChecker
    from bench.learn_vs_trl import cut
    from bench.learn_vs_trl_sides import stop_ids

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids, checker = set(stop_ids(tok, (stop,))), StopChecker(tok, (stop,))
    free = [i for i in range(len(tok)) if i not in ids][:40]  # prefixes that never stopped
    assert ids and free
    for prefix in ([], free[:3], free[-5:]):
        assert {i for i in range(len(tok)) if checker.hit([*prefix, i])} == ids
    assert cut("76 + 9 = 85\n\nThe answer is 8", ("\n",)) == "76 + 9 = 85\n"
    assert cut("85", ("\n",)) == "85"
