"""docs/openrlhf.md's flag table is what `alignflow run` does: generated from the same
tables, and every flag of both OpenRLHF generations is a key or refused with a reason."""

from __future__ import annotations

from pathlib import Path

from alignflow.flows.compat import reference
from alignflow.flows.compat.table import render, row_of, rows, splice

DOC = Path(__file__).resolve().parents[2] / "docs" / "openrlhf.md"
LOGGER_WORDS = ("logging_steps", "wandb", "tensorboard")  # logger.* keys: issue 14's work


def test_the_document_table_is_current():
    text = DOC.read_text()
    assert splice(text, render(rows())) == text, \
        "docs/openrlhf.md is stale: python -m alignflow.flows.compat.table --write docs/openrlhf.md"


def test_every_flag_is_a_key_or_refused_with_a_reason():
    table = rows()
    assert len(table) == len(reference.flags()) > 800
    unknown = [f"{r.script} {r.version} --{r.flag}" for r in table if r.status == "unknown"
               and not any(w in r.flag for w in LOGGER_WORDS)]
    assert unknown == []
    assert all(r.why for r in table if r.status not in ("same", "mapped", "unknown"))
    assert all(r.key for r in table if r.status in ("same", "mapped"))


def test_rows_say_where_a_flag_goes():
    flag = {(f.script, f.version, f.name): f for f in reference.flags()}
    init_kl = row_of(flag["train_ppo_ray", "0.9.10", "init_kl_coef"])
    assert (init_kl.key, init_kl.status) == ("algo.kl.init_coef", "mapped")
    dotted = row_of(flag["train_ppo_ray", "0.11", "algo.kl.init_coef"])
    assert (dotted.key, dotted.status) == ("algo.kl.init_coef", "same")
    zero = row_of(flag["train_ppo_ray", "0.9.10", "zero_stage"])
    assert (zero.key, zero.status) == ("ds.zero_stage", "mapped")  # the DeepSpeed trainer
    assert row_of(flag["train_ppo_ray", "0.9.10", "seed"]).status == "mapped"
