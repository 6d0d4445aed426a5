"""OpenRLHF's flags of every release: the table is the reference's, every flag is classed by
the one rule, the hand-written reasons are still true, alignflow's defaults are OpenRLHF's
(bar the listed differences), and docs/openrlhf.md shows exactly that."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignflow.flows.compat import defaults, reference, refgen, rules, table
from alignflow.flows.config.types import config_paths
from alignflow.flows.loader import load_flow

DOC = Path(__file__).resolve().parents[2] / "docs" / "openrlhf.md"
FLOWS = ("grpo", "ppo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "dr_grpo", "sft",
         "csft", "dpo", "rm", "kto", "prm", "distill")


def _paths(flow: str) -> dict:
    return config_paths(load_flow(flow)[1])


def test_the_table_is_generated_from_the_reference():
    text = refgen.render(refgen.rows(refgen.REFERENCE.read_text()))
    assert text == refgen.TSV.read_text(), \
        "stale: python -m alignflow.flows.compat.refgen --write"
    assert {f.cli for f in reference.flags()} == set(refgen.TRAINING)
    assert len(reference.flags()) > 1000


def test_every_flag_of_every_release_is_classed():
    unclassed = []
    for flag in reference.flags():
        decision = rules.decide(flag, _paths(table.FLOW_OF_CLI[flag.cli]))
        if decision.kind in ("missing", "inert") and not decision.reason:
            unclassed.append(f"{flag.cli} --{flag.name} -> {decision.keys}")
    assert unclassed == [], "give these a key, or a reason in rules.MISSING / INERT"


def _used_keys() -> set[str]:
    return {k for flag in reference.flags()
            for k in rules.decide(flag, _paths(table.FLOW_OF_CLI[flag.cli])).keys}


def test_the_reasons_for_a_missing_key_are_still_true():
    """A reason names a key alignflow lacks: once the key exists, its flags map onto it and
    the reason must go (it is then used by no flag)."""
    every_path = set().union(*(_paths(f) for f in FLOWS))
    used = _used_keys()
    for key in [*rules.MISSING, *rules.INERT]:
        assert key in used, f"{key}: no flag needs this reason any more; delete it"
        owners = [f for f in FLOWS if key in _paths(f)]
        assert key not in every_path or owners, key
    assert set(rules.MISSING).isdisjoint(rules.INERT)


def test_flags_dropped_without_a_successor_are_the_only_hand_mapped_ones():
    for name in rules.EXTRA:
        renamed = [f for f in reference.flags() if f.name == name and f.renamed]
        assert renamed == [], f"--{name} has a successor in the reference: derive it"


@pytest.mark.parametrize("flow", FLOWS)
def test_alignflows_defaults_are_openrlhfs(flow):
    unlisted = [f"{k}: OpenRLHF {a!r}, alignflow {b!r}" for k, a, b in defaults.differences(flow)
                if not defaults.listed(flow, k)]
    assert unlisted == [], "take OpenRLHF's default, or list why in defaults.DIFFERENT"


def test_every_listed_difference_still_differs():
    found = {(flow, key) for flow in FLOWS for key, _a, _b in defaults.differences(flow)}
    for flow, key in defaults.DIFFERENT:
        assert any(k == key and (flow in ("*", f)) for f, k in found), \
            f"{flow} {key}: alignflow's default is OpenRLHF's now; delete the entry"


def test_the_document_is_current():
    text = DOC.read_text()
    assert table.splice(text, table.render()) == text, \
        "docs/openrlhf.md is stale: python -m alignflow.flows.compat.table --write docs/openrlhf.md"


def test_rows_say_where_a_flag_goes():
    ppo = reference.of_cli("train_ppo_ray")
    assert table.row(ppo["init_kl_coef"])[2:4] == ("`algo.kl.init_coef`", "renamed")
    assert table.row(ppo["algo.kl.init_coef"])[2:4] == ("`algo.kl.init_coef`", "same")
    assert table.row(ppo["zero_stage"])[2:4] == ("`ds.zero_stage`", "renamed")
    assert table.row(ppo["bf16"])[2:4] == ("`ds.param_dtype` = `bf16`", "sets")
    assert table.row(ppo["seed"])[3] == "run seed"
    assert table.row(ppo["eval_steps"])[2:4] == ("`eval.steps`", "renamed")
    assert table.row(ppo["aux_loss_coef"])[2:4] == ("none (`actor.aux_loss_coef`)", "refused")
    assert table.row(reference.of_cli("train_kd")["kd_coef"])[2] == "`model.kd_coef`"
