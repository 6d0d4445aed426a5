"""`bench/peers.py` in its CPU tiny mode (issue 46): it runs, says what work every side
does, and alignflow's side does that work — DPO with its reference pass, GRPO without one
(β 0 on every side: TRL's beta=0 and the floor have no reference model). TRL's side runs
where the `bench` extra is installed. Figures are not judged here."""

from __future__ import annotations

import importlib.util

import pytest

from bench.peers import main

pytestmark = pytest.mark.slow


def test_the_tiny_mode_compares_the_same_work_and_says_so(capsys):
    sides = "alignflow,floor" + (",trl" if importlib.util.find_spec("trl") else "")
    results = main(["--tiny", "--reps", "1", "--kinds", "dpo,grpo", "--sides", sides])
    out = capsys.readouterr().out
    assert "same work, grpo: β 0 on every side" in out
    assert "same work, dpo: β 0.1 on every side" in out
    assert "one optimizer step per generation (8 samples, micro-batches of 4)" in out
    for kind in ("dpo", "grpo"):
        for side in sides.split(","):
            (res,) = results[kind][side]
            assert res["rc"] == 0 and res["wall_s"] > 0 and res["cpu_s"] > 0
    dpo_tasks, grpo_tasks = (results[k]["alignflow"][0]["tasks"] for k in ("dpo", "grpo"))
    assert "reference" in dpo_tasks, dpo_tasks
    assert not [t for t in grpo_tasks if t.endswith("/reference")], grpo_tasks
    assert [t for t in grpo_tasks if t.startswith("iter-0000/")], grpo_tasks
