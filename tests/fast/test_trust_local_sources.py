"""Local models and data are pinned like remote ones (issue 40 §2): a run started here
records their content hashes, signed; a resume reads a local source only if its bytes are
the signed ones or this command names it. A record from elsewhere — unsigned, or signed by
another machine's key — asks for each source by name, one line each. `drive` is a probe."""

from __future__ import annotations

import json
import re

import pytest

from alignflow.errors import FlowError
from alignflow.flows.config import load_config
from alignflow.flows.control import api, runner
from alignflow.flows.journal import runs
from alignflow.flows.rl.config import RLConfig


@pytest.fixture
def probe(monkeypatch, tmp_path):
    monkeypatch.delenv("ALIGNFLOW_TRUSTED_DIRS", raising=False)
    monkeypatch.setenv("ALIGNFLOW_TRUST_FILE", str(tmp_path / "no-trust.toml"))
    seen: list = []
    monkeypatch.setattr(runner, "_run_body", lambda *a, **kw: seen.append(1))
    return seen


def _started(tmp_path, probe) -> tuple[str, dict]:
    """A grpo run started here on a local data file and a local model folder."""
    rows, model = tmp_path / "rows.jsonl", tmp_path / "model"
    rows.write_text('{"input": "1+1", "answer": "2"}\n')
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    cfg = load_config(RLConfig, sets=[f"data.prompt_dataset={rows}",
                                      f"actor.model_name_or_path={model}"])
    store = str(tmp_path / "store")
    api.run("grpo", cfg, run_id="r", store=store, executor="inline")
    return store, {"rows": rows, "model": model}


def test_a_run_pins_its_local_sources_and_resumes_here_without_a_flag(tmp_path, probe):
    store, paths = _started(tmp_path, probe)
    pins = runs.read_run(api.open_store(store), "r")["sources"]
    assert set(pins) == {"data.prompt_dataset", "actor.model_name_or_path"}
    assert pins["data.prompt_dataset"]["url"] == str(paths["rows"])
    api.resume("r", store=store)
    assert len(probe) == 2


def test_a_changed_local_source_is_read_only_when_named(tmp_path, probe):
    store, paths = _started(tmp_path, probe)
    paths["rows"].write_text('{"input": "2+2", "answer": "4"}\n')
    with pytest.raises(FlowError, match=r"data.prompt_dataset: source .*rows.jsonl' changed "
                                        "since the run recorded it"):
        api.resume("r", store=store)
    api.resume("r", store=store, trust=[str(paths["rows"])])
    api.resume("r", store=store)  # the new bytes, recorded and signed
    assert len(probe) == 3


def test_a_store_that_names_another_local_file_gets_nothing_read(tmp_path, probe):
    """Route 2: a stored data path pointed at a file of this machine, `identity` dropped."""
    store, _ = _started(tmp_path, probe)
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"input": "not yours", "answer": "0"}\n')
    path = tmp_path / "store" / "runs" / "r" / "run.json"
    meta = json.loads(path.read_text())
    meta["config"]["fields"]["data"]["fields"]["prompt_dataset"] = str(secret)
    path.write_text(json.dumps({k: v for k, v in meta.items() if k != "identity"}))
    with pytest.raises(FlowError) as err:
        api.resume("r", store=store)
    lines = str(err.value).splitlines()
    assert "its record was changed after this machine signed it" in lines[0]
    assert any(re.search(rf"reads data from '{secret}' \(data.prompt_dataset\), which this "
                         "machine never pinned", line) for line in lines)
    assert len(probe) == 1


def test_another_machine_names_each_source_in_one_line(tmp_path, probe, monkeypatch):
    store, paths = _started(tmp_path, probe)
    monkeypatch.setenv("ALIGNFLOW_KEY_FILE", str(tmp_path / "another-machine.key"))
    with pytest.raises(FlowError) as err:
        api.resume("r", store=store)
    lines = str(err.value).splitlines()
    assert "signed by another machine's key" in lines[0] and len(lines) == 3
    assert sorted(line.split("(")[1].split(")")[0] for line in lines[1:]) == [
        "actor.model_name_or_path", "data.prompt_dataset"]
    api.resume("r", store=store, trust=[str(paths["rows"]), str(paths["model"])])
    api.resume("r", store=store)  # signed by this machine's key now
    assert len(probe) == 3


def test_status_says_when_a_run_is_only_the_stores_word(tmp_path, probe, capsys):
    from alignflow.flows.cli import views

    store, _ = _started(tmp_path, probe)
    views.print_status(api.open_store(store), "r")
    assert "trust:" not in capsys.readouterr().out  # signed here
    path = tmp_path / "store" / "runs" / "r" / "run.json"
    path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items()
                                if k != "signature"}))
    views.print_status(api.open_store(store), "r")
    assert "trust: its record carries no signature of this machine: a resume asks for the " \
           "say-so" in capsys.readouterr().out


def test_what_a_resume_set_names_is_the_users_own(tmp_path, probe, monkeypatch):
    """`resume --set` is typed on this command line: a folder outside the store it names
    needs no other flag, even for a run from another machine (its sources still do)."""
    store, paths = _started(tmp_path, probe)
    monkeypatch.setenv("ALIGNFLOW_KEY_FILE", str(tmp_path / "another-machine.key"))
    path = tmp_path / "store" / "runs" / "r" / "run.json"
    meta = json.loads(path.read_text())
    meta["config"]["fields"]["logger"]["fields"]["tensorboard_dir"] = str(tmp_path / "tb")
    path.write_text(json.dumps(meta))
    sources = [str(paths["rows"]), str(paths["model"])]
    with pytest.raises(FlowError, match="writes to"):  # the store's word
        api.resume("r", store=store, trust=sources)
    api.resume("r", store=store, trust=sources,
               sets=[f"logger.tensorboard_dir={tmp_path / 'tb2'}"])  # typed here
    assert len(probe) == 2


def test_a_local_source_gone_keeps_its_pin_and_reads_nothing(tmp_path, probe):
    """A resume whose data file is gone goes on (the steps that read it may be committed;
    one that is not says "does not exist"); its pin stays, so bytes that reappear changed
    are refused."""
    store, paths = _started(tmp_path, probe)
    pinned = runs.read_run(api.open_store(store), "r")["sources"]["data.prompt_dataset"]
    paths["rows"].unlink()
    api.resume("r", store=store)
    assert runs.read_run(api.open_store(store), "r")["sources"]["data.prompt_dataset"] == pinned
    paths["rows"].write_text('{"input": "9+9", "answer": "18"}\n')
    with pytest.raises(FlowError, match="changed since the run recorded it"):
        api.resume("r", store=store)
