"""A campaign driver killed with SIGKILL: during its durable sleep (the restarted driver
keeps the recorded wake time) and in the middle of a round (the round run resumes where it
stopped: its committed tasks are not run again). And a campaign on the S3 store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from alignflow.artifacts.store import Store
from alignflow.catalog.catalog import Catalog
from alignflow.flows.campaign import control
from alignflow.flows.journal import runs
from tests.campaign.conftest import write_prompts
from tests.campaign.test_campaign_rounds import RID, cli

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _start(path, store) -> subprocess.Popen:
    args = [sys.executable, "-m", "alignflow.cli", "campaign", "start", str(path),
            "--store", str(store)]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _kill_when(proc: subprocess.Popen, found, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while not found():
        assert proc.poll() is None, "the driver ended before the kill point"
        assert time.time() < deadline, "kill point never reached"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _edit(path, **changes):
    cfg = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        section, _, name = key.rpartition("__")
        (cfg[section] if section else cfg)[name] = value
    path.write_text(yaml.safe_dump(cfg))


def test_kill_during_the_durable_sleep_keeps_the_wake_time(campaign_files, tmp_path):
    path, inputs = campaign_files
    _edit(path, schedule__every="45s")  # round 0 must end well before round 1 is due
    store = Store.open(str(tmp_path / "store"))
    write_prompts(inputs / "a.jsonl", 0, 4)
    proc = _start(path, store.url)
    sleep_key = runs.manifest_path(RID, "round-0001/sleep")
    _kill_when(proc, lambda: store.exists(sleep_key))
    wake = store.read_json(sleep_key)["output"]["wake"]
    write_prompts(inputs / "b.jsonl", 4, 4)
    assert wake > time.time(), "the kill came after the wake time; make the schedule longer"
    restarted = _start(path, store.url)
    assert restarted.wait(timeout=300) == 0
    journal = runs.read_manifests(store, RID)
    assert journal["round-0001/sleep"]["output"]["wake"] == wake  # not re-committed
    assert journal["round-0001/control"]["started"] >= wake  # slept what was left
    r0, r1 = control.records(store, RID)
    assert r1["due"] == pytest.approx(r0["due"] + 12) and r1["inputs"] == 1
    assert runs.read_run(store, RID)["status"] == runs.SUCCESSFUL


def test_kill_mid_round_resumes_the_round_run(campaign_files, tmp_path):
    path, inputs = campaign_files
    _edit(path, max_rounds=1)
    cfg = yaml.safe_load(path.read_text())
    # 4 prompts, 4 per batch: 4 episodes give 4 iterations, so the kill after iteration 0's
    # learn lands before the export (manifests of background checkpoints commit in bursts)
    cfg["config"]["train"].update(max_iterations=4, num_episodes=4)
    path.write_text(yaml.safe_dump(cfg))
    store = Store.open(str(tmp_path / "store"))
    write_prompts(inputs / "a.jsonl", 0, 4)
    proc = _start(path, store.url)

    def child_learned() -> bool:
        return bool(store.list("runs", "campaign-tiny-*/tasks/iter-0000/learn.json"))
    _kill_when(proc, child_learned)
    child = store.list("runs", "campaign-tiny-*/tasks/iter-0000/learn.json")[0].split("/")[1]
    before = runs.read_manifests(store, child)
    assert "export" not in before
    assert _start(path, store.url).wait(timeout=300) == 0
    after = runs.read_manifests(store, child)
    assert {k: after[k]["started"] for k in before} == {k: m["started"] for k, m in before.items()}
    meta = runs.read_run(store, child)
    assert (meta["status"], meta["drivers"], meta["parent_run"]) == (runs.SUCCESSFUL, 2, RID)
    assert [r["round_run"] for r in control.records(store, RID)] == [child]
    with Catalog(store) as cat:
        assert cat.sql("SELECT count(*) FROM campaign_inputs").to_pylist()[0] == {"count_star()": 1}


def test_campaign_on_the_s3_store_with_an_s3_source(campaign_files, s3_server, s3_bucket, clock,
                                                     monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    path, inputs = campaign_files
    _edit(path, inputs__source=f"s3://{s3_bucket}/incoming",
          gate__min_improvement=-1.0)  # always promote: round 1 loads round 0's S3 export
    store = Store.open(f"s3://{s3_bucket}/store")
    source = Store.open(f"s3://{s3_bucket}/incoming")
    source.write_bytes("a.jsonl", write_prompts(inputs / "a.jsonl", 0, 4).read_bytes())
    cli("tick", path, store.url)
    source.write_bytes("b.jsonl", write_prompts(inputs / "b.jsonl", 4, 4).read_bytes())
    clock.advance(3600)
    cli("tick", path, store.url)
    r0, r1 = control.records(store, RID)
    assert (r0["inputs"], r1["inputs"], r1["policy_in"]) == (1, 1, r0["candidate"])
    with Catalog(store) as cat:
        paths = cat.sql("SELECT path FROM campaign_inputs ORDER BY path").column(0).to_pylist()
        promoted = cat.sql("SELECT count(*) AS n FROM rounds WHERE promoted").to_pylist()[0]["n"]
    assert paths == [f"s3://{s3_bucket}/incoming/a.jsonl", f"s3://{s3_bucket}/incoming/b.jsonl"]
    assert promoted == 2
    assert runs.read_run(store, RID)["status"] == runs.SUCCESSFUL
