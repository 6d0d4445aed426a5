"""Credentials are masked in every stored and shown form while the run uses the real value
(issue 20 §6): URL userinfo, credential query values, Authorization headers, variables a
config references as ${NAME}; run.json keeps them masked and a resume gets them back only
from this machine; W&B gets neither the key in its recorded argv nor a password in its
config."""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

from alignflow.artifacts import redact as redact_mod
from alignflow.artifacts.redact import expand, redact
from alignflow.errors import ConfigError, FlowError
from alignflow.flows.config import load_config
from alignflow.flows.control import api, runner
from alignflow.flows.rl.config import RLConfig


@pytest.mark.parametrize("text,shown", [
    ("http://:PASSWORD1@rm.local/x", "http://:***@rm.local/x"),
    ("https://ghp_abcdef123@github.com/o/r", "https://***@github.com/o/r"),
    ("https://bob:pa55@rm/x?token=abc123&n=2&api_key=zz9", "https://bob:***@rm/x?token=***&n=2"
     "&api_key=***"),
    ("GET /o?X-Amz-Signature=deadbeef&X-Amz-Date=2026", "GET /o?X-Amz-Signature=***"
     "&X-Amz-Date=2026"),
    ('curl -H "Authorization: Bearer eyJhbGc.x.y" u', 'curl -H "Authorization: Bearer ***" u'),
    ('{"authorization": "Basic dXNlcjpw"}', '{"authorization": "Basic ***"}'),
    ("see http://host:8080/path and s3://bucket/key", "see http://host:8080/path and "
     "s3://bucket/key"),
])
def test_credential_shapes_are_masked(text, shown):
    assert redact(text, {}) == shown


def test_a_referenced_variable_is_used_and_masked_whatever_its_name(monkeypatch):
    monkeypatch.setenv("RM_PASS", "plain-name-value-42")
    monkeypatch.setattr(redact_mod, "_REFERENCED", {})
    url = "http://user:${RM_PASS}@rm.local/score"
    assert expand(url, "reward.remote_url") == "http://user:plain-name-value-42@rm.local/score"
    assert redact("failed with plain-name-value-42") == "failed with <redacted $RM_PASS>"
    monkeypatch.delenv("RM_PASS")
    with pytest.raises(ConfigError, match=r"reward.remote_url: \$\{RM_PASS\} is not set"):
        expand(url, "reward.remote_url")


@pytest.fixture
def probe(monkeypatch, tmp_path):
    monkeypatch.delenv("ALIGNFLOW_TRUSTED_DIRS", raising=False)
    monkeypatch.setenv("ALIGNFLOW_TRUST_FILE", str(tmp_path / "none.toml"))
    seen: list = []
    monkeypatch.setattr(runner, "_run_body", lambda store, run_id, flow, config, driver:
                        seen.append(config))
    return seen


def test_run_json_keeps_a_password_masked_and_a_resume_needs_it_again(tmp_path, probe):
    store, url = tmp_path / "store", "http://bob:hunter2-pw@127.0.0.1:9/score"
    cfg = load_config(RLConfig, sets=[f"reward.remote_url={url}"])
    api.run("grpo", cfg, store=str(store), run_id="g", executor="inline")
    assert probe[-1].reward.remote_url == url  # the run itself uses the real value
    text = (store / "runs" / "g" / "run.json").read_text()
    assert "hunter2" not in text and "http://bob:***@127.0.0.1:9/score" in text
    meta = json.loads(text)
    meta["status"] = "FAILED"
    (store / "runs" / "g" / "run.json").write_text(json.dumps(meta))
    with pytest.raises(FlowError, match=r"config key 'reward.remote_url' holds a credential "
                                        r"stored masked \('http://bob:\*\*\*@127.0.0.1:9/score'"
                                        r"\); give it again"):
        api.resume("g", store=str(store))
    api.resume("g", store=str(store), trust=[url])  # given again: confirmed and restored
    assert probe[-1].reward.remote_url == url


def test_a_reference_is_stored_as_written(tmp_path, probe, monkeypatch):
    monkeypatch.setenv("RM_PASS", "s3cr3t-value-77")
    monkeypatch.setattr(redact_mod, "_REFERENCED", {})
    store = tmp_path / "store"
    cfg = load_config(RLConfig, sets=["reward.remote_url=http://u:${RM_PASS}@127.0.0.1:9/x"])
    api.run("grpo", cfg, store=str(store), run_id="g", executor="inline",
            trust=["http://u:${RM_PASS}@127.0.0.1:9/x"])
    text = (store / "runs" / "g" / "run.json").read_text()
    assert "${RM_PASS}" in text and "s3cr3t" not in text
    assert redact("s3cr3t-value-77") == "<redacted $RM_PASS>"


def test_wandb_records_no_key_in_its_argv_or_config(monkeypatch, tmp_path):
    from alignflow.artifacts.store import Store
    from alignflow.flows.journal.runs import RunState
    from alignflow.flows.tracking.sink import open_sink

    monkeypatch.setattr(redact_mod, "_REFERENCED", {})
    seen: dict = {}
    module = types.ModuleType("wandb")

    def init(**kw):
        seen.update(argv=list(sys.argv), config=kw["config"], settings=kw["settings"])
        return types.SimpleNamespace(define_metric=lambda *a, **k: None)
    module.init = init
    module.Settings = types.SimpleNamespace
    monkeypatch.setitem(sys.modules, "wandb", module)
    monkeypatch.setenv("WANDB_API_KEY", "an-older-key-value")
    monkeypatch.setattr(sys, "argv", ["alignflow", "run", "grpo", "--use_wandb",
                                      "wandb-key-0123456789"])
    cfg = load_config(RLConfig, sets=["logger.wandb.key=wandb-key-0123456789",
                                      "reward.remote_url=http://a:pw99xyz@h/x"])
    state = RunState(Store.open(str(tmp_path / "store")), "r", {}, {})
    open_sink(state, cfg, types.SimpleNamespace(manifests={}, listeners=[]))
    assert "wandb-key-0123456789" not in " ".join(seen["argv"])
    assert sys.argv[-1] == "wandb-key-0123456789"  # the process's own argv is untouched
    assert seen["config"]["reward"]["remote_url"] == "http://a:***@h/x"
    assert seen["settings"].api_key == "wandb-key-0123456789"  # to W&B, not the environment
    assert os.environ["WANDB_API_KEY"] == "an-older-key-value"
