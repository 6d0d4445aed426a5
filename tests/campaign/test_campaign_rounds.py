"""Campaign rounds end to end on the tiny model (round runs inline, a shifted clock): the
growing folder is consumed exactly once, two ticks for one due time run one round, wake
times do not drift, the gate promotes and refuses, and lineage answers SQL."""

from __future__ import annotations

import pytest

from alignflow.artifacts.store import Store
from alignflow.catalog.catalog import Catalog
from alignflow.catalog.report import render_report
from alignflow.flows.campaign import control
from alignflow.flows.cli.campaign import run as campaign_cli
from alignflow.flows.journal import runs
from alignflow.flows.journal.lease import Lease
from tests.campaign.conftest import write_prompts

pytestmark = pytest.mark.slow
RID = "campaign-tiny"


class Args:
    def __init__(self, action, target, store, sets=()):
        self.action, self.target, self.store = action, target, store
        self.sets, self.address, self.seed, self.dry_run = list(sets), None, 0, False
        self.trust: list[str] = []  # `campaign start|tick --trust ITEM`


def cli(action, target, store, sets=()):
    return campaign_cli("campaign", Args(action, str(target), str(store), sets))


def test_growing_folder_two_ticks_and_no_drift(campaign_files, tmp_path, clock, capsys):
    path, inputs = campaign_files
    store = Store.open(str(tmp_path / "store"))
    write_prompts(inputs / "a.jsonl", 0, 4)
    write_prompts(inputs / "b.jsonl", 4, 4)
    assert cli("tick", path, store.url) == 0  # round 0 is due at once: a and b
    due0 = control.records(store, RID)[0]["due"]
    clock.advance(1800)
    write_prompts(inputs / "c.jsonl", 8, 4)
    assert cli("tick", path, store.url) == 0  # round 1 is not due yet: nothing runs
    assert "next round due" in capsys.readouterr().out
    assert len(control.records(store, RID)) == 1
    meta = runs.read_run(store, RID)
    assert (meta["status"], meta["wake_at"]) == (runs.SLEEPING, pytest.approx(due0 + 3600))
    clock.advance(1900)
    held = Lease(store, RID).acquire()  # another driver (alive) is at work on the campaign
    try:
        assert cli("tick", path, store.url) == 0  # so this tick leaves it alone
    finally:
        held.release()
    assert "a driver is at work on it" in capsys.readouterr().out
    assert len(control.records(store, RID)) == 1
    assert cli("tick", path, store.url) == 0  # round 1: c only
    assert cli("tick", path, store.url) == 0  # finished: max_rounds = 2
    with Catalog(store) as cat:
        files = cat.sql("SELECT round, path, round_run FROM campaign_inputs "
                        "ORDER BY path").to_pylist()
        rounds = cat.sql("SELECT * FROM rounds ORDER BY round").to_pylist()
        evals = cat.sql("SELECT iteration, avg(reward) AS r, count(*) AS n FROM rollouts "
                        "WHERE run_id = ? GROUP BY 1 ORDER BY 1", [RID]).to_pylist()
    assert [(f["round"], f["path"].rsplit("/", 1)[1]) for f in files] == [
        (0, "a.jsonl"), (0, "b.jsonl"), (1, "c.jsonl")]
    assert [r["due"].timestamp() for r in rounds] == pytest.approx([due0, due0 + 3600])
    assert [r["inputs"] for r in rounds] == [2, 1]
    assert files[0]["round_run"] == rounds[0]["round_run"] != rounds[1]["round_run"]
    assert [r["round_run_status"] for r in rounds] == ["SUCCESSFUL"] * 2
    # the gate's scores are the committed eval rollouts' mean reward (8 prompts, greedy)
    assert [e["n"] for e in evals] == [8, 8, 8]
    assert rounds[0]["incumbent_score"] == pytest.approx(evals[0]["r"], abs=1e-6)
    assert rounds[0]["candidate_score"] == pytest.approx(evals[1]["r"], abs=1e-6)
    assert runs.read_run(store, RID)["status"] == runs.SUCCESSFUL
    with Catalog(store) as cat:  # lineage on the reports of the campaign and of a round
        page = render_report(cat, RID)
        assert "Campaign rounds" in page and rounds[1]["round_run"] in page
        assert "gate metric per round" in page
        child = render_report(cat, rounds[1]["round_run"])
        assert ">Campaign<" in child and "policy v" in child and RID in child
        names = cat.sql("SELECT name, rounds, policy_version FROM campaigns").to_pylist()
    assert names == [{"name": "tiny", "rounds": 2,
                      "policy_version": rounds[1]["policy_out_version"]}]


@pytest.mark.parametrize(("min_improvement", "promoted"), [(-1.0, True), (10.0, False)])
def test_gate_promotes_or_refuses(campaign_files, tmp_path, clock, min_improvement, promoted):
    path, inputs = campaign_files
    store = Store.open(str(tmp_path / "store"))
    write_prompts(inputs / "a.jsonl", 0, 4)
    sets = [f"gate.min_improvement={min_improvement}", "max_rounds=2"]
    cli("tick", path, store.url, sets)
    write_prompts(inputs / "b.jsonl", 4, 4)
    clock.advance(3600)
    cli("tick", path, store.url, sets)
    r0, r1 = control.records(store, RID)
    assert (r0["promoted"], r1["promoted"]) == (promoted, promoted)
    assert r0["status"] == ("promoted" if promoted else "refused")
    if promoted:  # round 1 starts from round 0's policy; versions count promotions
        assert r1["policy_in"] == r0["candidate"] == f"runs/{r0['round_run']}/final/actor"
        assert (r0["policy_out_version"], r1["policy_out_version"]) == (1, 2)
        assert r1["incumbent_score"] == r0["candidate_score"]
    else:  # refused: every round starts from the initial policy
        assert r0["policy_in"] == r1["policy_in"] == r0["policy_out"] == r1["policy_out"]
        assert (r0["policy_out_version"], r1["policy_out_version"]) == (0, 0)
        assert r1["incumbent_score"] == r0["incumbent_score"]
    # retention (keep_rounds 1): round 0's checkpoints and model are gone (it is not the
    # current policy either way), round 1's are kept
    assert not store.list(f"runs/{r0['round_run']}/checkpoints")
    assert not store.list(f"runs/{r0['round_run']}/final")
    assert store.list(f"runs/{r1['round_run']}/checkpoints")
    assert store.list(f"runs/{r1['round_run']}/final")
