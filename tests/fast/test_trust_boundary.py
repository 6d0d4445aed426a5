"""A stored run acts only with this machine's say-so (issue 20 §1-3): every spelling of a
code file a config can hold, a campaign's round flow, URLs, write folders and Ray addresses
are refused on resume unless confirmed locally; a stored config decodes strictly. `drive`
is replaced by a probe, so what would run is checked without running a model."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from alignflow.artifacts import usercode
from alignflow.errors import FlowError
from alignflow.flows.config import load_config
from alignflow.flows.control import api, runner
from alignflow.flows.journal import codec
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.trust import signing
from alignflow.flows.trust.config import identity


@pytest.fixture(autouse=True)
def _nothing_trusted(monkeypatch, tmp_path):
    monkeypatch.delenv("ALIGNFLOW_TRUSTED_DIRS", raising=False)
    monkeypatch.setenv("ALIGNFLOW_TRUST_FILE", str(tmp_path / "no-trust.toml"))


@pytest.fixture
def probe(monkeypatch):
    """Replaces the flow's body: records the code this process may run when it would start
    (run.json records what the drive's start records)."""
    seen: list[usercode.Allowances] = []
    monkeypatch.setattr(runner, "_run_body", lambda *a, **kw: seen.append(usercode.current()))
    return seen


def _stored(store: Path, sets: list[str], run_id: str = "g", signed: bool = False,
            **meta_fields) -> Path:
    """A FAILED grpo run whose run.json holds the config of `sets` (then `meta_fields`),
    signed by this machine's key when `signed` (as a run started here records it)."""
    cfg = load_config(RLConfig, sets=["rollout.max_new_tokens=8", *sets])  # agents need one
    run_dir = store / "runs" / run_id
    run_dir.mkdir(parents=True)
    meta = {"format": 1, "run_id": run_id, "flow": "grpo", "flow_ref": "grpo",
            "config": codec.encode(cfg), "identity": codec.encode(identity(cfg)), "seed": 0,
            "status": "FAILED", "created": time.time(), "executor": "inline",
            "code": {"refs": []}}
    meta.update(meta_fields)
    (run_dir / "run.json").write_text(json.dumps(signing.signed(meta) if signed else meta))
    return run_dir / "run.json"


def _evil(folder: Path, marker: Path) -> Path:
    path = folder / "evil.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\n"
                    "def reward_func(q, p, l):\n    return [0.0] * len(q)\n")
    return path


@pytest.mark.parametrize("sets,key", [
    (["reward.sources={store}/x://../evil.py"], "reward.sources[0]"),
    (["reward.sources=acc={store}/evil.py"], "reward.sources[0]"),
    (["reward.remote_url={store}/evil.py,http://127.0.0.1:9/x"], "reward.remote_url"),
    (["train.agent_func_path={store}/x://../evil.py"], "train.agent_func_path"),
])
def test_every_spelling_of_a_code_file_is_refused(tmp_path, probe, sets, key):
    store, marker = tmp_path / "store", tmp_path / "marker"
    store.mkdir()
    evil = _evil(store, marker)
    _stored(store, [s.format(store=store) for s in sets])
    with pytest.raises(FlowError, match=re.escape(f"names code file '{evil}' ({key})")):
        api.resume("g", store=str(store))
    assert not marker.exists() and probe == []
    api.resume("g", store=str(store), trust=[str(evil)])  # named here: the user's say-so
    assert probe[-1].files == {str(evil): usercode.sha256_of(evil)} and not marker.exists()


def test_a_changed_file_is_accepted_only_when_named(tmp_path, probe):
    store, marker = tmp_path / "store", tmp_path / "marker"
    rewards = tmp_path / "rewards"
    rewards.mkdir()
    reward = _evil(rewards, marker)
    recorded = [{"key": "reward.sources[0]", "path": str(reward),
                 "sha256": usercode.sha256_of(reward)}]
    path = _stored(store, [f"reward.sources={reward}"], code={"refs": recorded}, signed=True)
    api.resume("g", store=str(store))  # this machine's record, same bytes: no flag
    reward.write_text(reward.read_text() + "# fixed\n")
    with pytest.raises(FlowError, match="changed since the run recorded it; accept the change "
                                        rf"by naming it: --trust {reward}"):
        api.resume("g", store=str(store), trust=[str(rewards)])
    with pytest.raises(FlowError, match="changed since"):
        api.resume("g", store=str(store), trust_store=True)
    api.resume("g", store=str(store), trust=[str(reward)])  # the user's fix, named
    assert json.loads(path.read_text())["code"]["refs"][0]["sha256"] == \
        usercode.sha256_of(reward)  # recorded from now on, signed again
    api.resume("g", store=str(store))
    assert len(probe) == 3 and not marker.exists()


@pytest.mark.parametrize("where", ["in-store", "elsewhere"])
def test_a_trusted_directory_never_trusts_the_stores_hash(tmp_path, probe, monkeypatch, where):
    """Route 3: a store under a trusted directory adds a file with its hash, or a store
    elsewhere names another file of it with its hash; unsigned, both are refused."""
    project, marker = tmp_path / "project", tmp_path / "marker"
    store = project / "alignflow-store" if where == "in-store" else tmp_path / "store"
    store.mkdir(parents=True)
    project.mkdir(exist_ok=True)
    evil = _evil(store if where == "in-store" else project, marker)
    monkeypatch.setenv("ALIGNFLOW_TRUSTED_DIRS", str(project))
    recorded = [{"key": "reward.sources[0]", "path": str(evil),
                 "sha256": usercode.sha256_of(evil)}]
    _stored(store, [f"reward.sources={evil}"], code={"refs": recorded})
    with pytest.raises(FlowError, match=re.escape(
            f"names code file '{evil}' (reward.sources[0]), which this machine never hashed")):
        api.resume("g", store=str(store))
    assert not marker.exists() and probe == []


def test_a_record_edited_after_signing_is_the_stores_word(tmp_path, probe):
    """A signed run whose record is edited (or whose signature is dropped) is untrusted:
    what it names needs the say-so again, and the refusal says why."""
    store = tmp_path / "store"
    path = _stored(store, ["reward.remote_url=http://127.0.0.1:9/a"], signed=True)
    api.resume("g", store=str(store))  # signed by this machine: no flag
    meta = json.loads(path.read_text())
    meta["config"]["fields"]["reward"]["fields"]["remote_url"] = "http://127.0.0.1:9/b"
    path.write_text(json.dumps(meta))
    with pytest.raises(FlowError, match=r"\(its record was changed after this machine signed "
                                        r"it\): its config sends the run's data to "):
        api.resume("g", store=str(store))
    path.write_text(json.dumps({k: v for k, v in meta.items() if k != "signature"}))
    with pytest.raises(FlowError, match="carries no signature of this machine"):
        api.resume("g", store=str(store))
    assert len(probe) == 1


def test_a_record_signed_by_another_machine_asks_for_the_say_so(tmp_path, probe, monkeypatch):
    store = tmp_path / "store"
    _stored(store, ["reward.remote_url=http://127.0.0.1:9/a"], signed=True)
    monkeypatch.setenv("ALIGNFLOW_KEY_FILE", str(tmp_path / "other-machine.key"))
    with pytest.raises(FlowError, match="signed by another machine's key"):
        api.resume("g", store=str(store))
    api.resume("g", store=str(store), trust=["http://127.0.0.1:9"])  # said here: signed anew
    api.resume("g", store=str(store))
    assert len(probe) == 2


@pytest.mark.parametrize("sets,needle,flag", [
    (["reward.sources=http://127.0.0.1:9/score"], "sends the run's data to "
     "'http://127.0.0.1:9/score' (reward.sources[0])", "http://127.0.0.1:9"),
    (["reward.remote_url=http://127.0.0.1:9/a,http://127.0.0.1:9/b"],
     "sends the run's data to 'http://127.0.0.1:9/a' (reward.remote_url)", "http://127.0.0.1:9"),
    (["logger.tensorboard_dir={outside}"], "writes to '{outside}' (logger.tensorboard_dir), "
     "outside the store", "{outside}"),
    (["ckpt.output_dir={outside}"], "writes to '{outside}' (ckpt.output_dir)", "{outside}"),
])
def test_effects_outside_the_store_need_a_local_say_so(tmp_path, probe, sets, needle, flag):
    store, outside = tmp_path / "store", str(tmp_path / "elsewhere")
    _stored(store, [s.format(outside=outside) for s in sets])
    with pytest.raises(FlowError, match="need this machine's say-so|outside the store|sends") \
            as err:
        api.resume("g", store=str(store))
    assert needle.format(outside=outside) in str(err.value)
    assert "--trust-store" in str(err.value) and probe == []
    api.resume("g", store=str(store), trust=[flag.format(outside=outside)])
    api.resume("g", store=str(store), trust_store=True)
    assert len(probe) == 2


def test_a_folder_inside_the_store_needs_no_say_so(tmp_path, probe):
    store = tmp_path / "store"
    _stored(store, [f"logger.tensorboard_dir={store}/tb"])
    api.resume("g", store=str(store))
    assert len(probe) == 1


def test_every_refusal_is_named_at_once(tmp_path, probe):
    store, marker = tmp_path / "store", tmp_path / "marker"
    store.mkdir()
    evil = _evil(store, marker)
    _stored(store, [f"reward.sources={evil},http://127.0.0.1:9/x",
                    f"logger.tensorboard_dir={tmp_path}/tb"])
    with pytest.raises(FlowError) as err:
        api.resume("g", store=str(store))
    lines = str(err.value).splitlines()
    assert "3 things its store names need this machine's say-so" in lines[0]
    assert [line.split()[2] for line in lines[1:]] == ["names", "sends", "writes"]


def test_a_foreign_record_in_the_config_is_refused(tmp_path, probe):
    store = tmp_path / "store"
    path = _stored(store, [])
    meta = json.loads(path.read_text())
    meta["config"]["fields"]["actor"] = {"__type__": "os:system", "fields": {"command": "x"}}
    path.write_text(json.dumps(meta))
    with pytest.raises(FlowError, match=r"runs/g/run.json: config key 'actor' holds a "
                                        r"'os:system' record; expected a '.*' section"):
        api.resume("g", store=str(store))
    meta["config"]["fields"]["actor"] = {"model_name_or_path": "x", "nope": 1}
    path.write_text(json.dumps(meta))
    with pytest.raises(FlowError, match=r"runs/g/run.json: .*'actor.nope'"):
        api.resume("g", store=str(store))
    assert probe == []


def test_a_config_that_decodes_to_another_model_is_refused(tmp_path, probe):
    store = tmp_path / "store"
    path = _stored(store, ["actor.model_name_or_path=tiny-llama"])
    meta = json.loads(path.read_text())
    meta["identity"]["actor.model_name_or_path"] = "smollm2-135m"  # as if recorded here,
    path.write_text(json.dumps(signing.signed(meta)))  # and the code now decodes otherwise
    with pytest.raises(FlowError, match="decodes to another model, dataset or reward than the "
                                        "run started with .*actor.model_name_or_path"):
        api.resume("g", store=str(store))
    assert probe == []


def _campaign(store: Path, flow: str) -> None:
    from alignflow.flows.campaign.config import CampaignConfig

    cfg = load_config(CampaignConfig, sets=["name=c", "flow=grpo", "schedule.every=1h"])
    run_dir = store / "runs" / "campaign-c"
    run_dir.mkdir(parents=True)
    encoded = codec.encode(cfg)
    encoded["fields"]["flow"] = flow
    (run_dir / "run.json").write_text(json.dumps({
        "format": 1, "run_id": "campaign-c", "flow": "campaign", "flow_ref": "campaign",
        "config": encoded, "seed": 0, "status": "SLEEPING", "wake_at": time.time() - 1,
        "created": time.time(), "executor": "inline"}))


def test_a_campaigns_stored_round_flow_is_never_imported(tmp_path, probe):
    store, marker = tmp_path / "store", tmp_path / "marker"
    store.mkdir()
    _campaign(store, "subprocess:run")
    out = api.tick(str(store))
    assert "never imports a module a store names" in out["campaign-c"] and probe == []
    evil = store / "flowfile.py"
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n")
    shutil.rmtree(store / "runs" / "campaign-c")  # its run.json and the released lease
    _campaign(store, f"{evil}:x.y")
    out = api.tick(str(store))
    assert "which this machine never hashed for the run" in out["campaign-c"]
    assert not marker.exists() and probe == []


def test_the_store_alone_never_picks_a_flow_module(tmp_path, probe):
    store = tmp_path / "store"
    _stored(store, [], flow_ref="subprocess:run")
    with pytest.raises(FlowError, match="neither a built-in flow nor a @flow this process "
                                        "imported"):
        api.resume("g", store=str(store), trust_store=True)
    assert probe == []
