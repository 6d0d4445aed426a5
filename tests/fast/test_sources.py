"""Sources (`artifacts/sources/`): a URL fetched once per node into a cache keyed by its
content, identified without a download while its listing is unchanged, held to the hash a
run pinned; and the driver's pins (`flows/trust/sources.py`). On `memory://` (the store
layer's in-process URLs) so it runs without S3; tests/slow/test_sources_s3.py does it on
moto's S3 server."""

from __future__ import annotations

import json
import uuid

import fsspec
import pytest

from alignflow.artifacts import usercode
from alignflow.artifacts.sources import SourceChanged, fetch, identify, local_path, read_member
from alignflow.artifacts.sources.hashing import content_hash, inventory
from alignflow.errors import ConfigError
from alignflow.flows.trust.check import Untrusted
from alignflow.flows.trust.sources import pin, source_specs


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_SOURCES_DIR", str(tmp_path / "sources"))
    monkeypatch.setenv("ALIGNFLOW_FETCH_PROGRESS_S", "0")  # a line per block: countable
    return tmp_path / "sources"


@pytest.fixture
def model_url():
    """A model-like folder on memory://, its own root per test."""
    root = f"/src-{uuid.uuid4().hex[:8]}"
    fs = fsspec.filesystem("memory")
    fs.pipe({f"{root}/m/config.json": b'{"model_type": "llama", "torch_dtype": "bfloat16"}',
             f"{root}/m/model.safetensors": b"w" * 3000, f"{root}/m/tok/vocab.json": b"{}",
             f"{root}/d.jsonl": b'{"input": "1+1", "label": "2"}\n'})
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


def test_content_hash_is_the_sorted_path_and_file_hash_list(tmp_path):
    (tmp_path / "b").write_bytes(b"2")
    (tmp_path / "a").write_bytes(b"1")
    files = inventory(tmp_path)
    assert list(files) == ["a", "b"] and files["a"]["bytes"] == 1
    assert content_hash(files) == content_hash(dict(reversed(files.items())))
    (tmp_path / "a").write_bytes(b"3")
    assert content_hash(inventory(tmp_path)) != content_hash(files)


def test_a_url_is_fetched_once_then_served_from_the_cache(cache, model_url, capsys):
    first = fetch(f"{model_url}/m/")
    assert (first.path / "tok/vocab.json").read_bytes() == b"{}"
    assert first.path.name == first.sha256 == content_hash(inventory(first.path, (".alignflow-source.json",)))
    assert "fetched memory://" in capsys.readouterr().err
    again = fetch(f"{model_url}/m")  # one spelling: the trailing slash does not matter
    assert again == first and capsys.readouterr().err == ""  # no download, no line


def test_a_one_file_source_keeps_its_name(cache, model_url):
    got = fetch(f"{model_url}/d.jsonl")
    assert got.path.name == "d.jsonl" and got.path.read_bytes().startswith(b'{"input"')


def test_changed_bytes_are_refused_against_the_pin_and_the_pin_needs_no_source(
        cache, model_url):
    import shutil

    url = f"{model_url}/m"
    pinned = fetch(url).sha256
    fsspec.filesystem("memory").pipe(f"{model_url[len('memory://'):]}/m/model.safetensors",
                                     b"x" * 3000)
    assert fetch(url, expected=pinned).sha256 == pinned  # cached: the source is not asked
    shutil.rmtree(cache)  # another node: it must fetch, and gets other bytes
    with pytest.raises(SourceChanged) as err:
        fetch(url, expected=pinned)
    line = str(err.value)
    assert f"recorded sha256 {pinned[:16]}…, now " in line
    assert url in line and "\n" not in line


def test_a_node_loads_what_the_run_pinned(cache, model_url):
    url = f"{model_url}/m"
    sha = fetch(url).sha256
    with usercode.allowing(usercode.Allowances(sources={url: "f" * 64})), \
            pytest.raises(SourceChanged, match="recorded sha256 ffffffffffffffff…"):
        local_path(url)
    with usercode.allowing(usercode.Allowances(sources={url: sha})):
        assert local_path(url).endswith(sha)


def test_identify_needs_no_download_while_the_listing_is_unchanged(cache, model_url, capsys):
    url = f"{model_url}/m"
    sha, fingerprint = identify(url)
    capsys.readouterr()
    recorded = {"sha256": "a" * 64, "fingerprint": fingerprint}
    assert identify(url, recorded) == ("a" * 64, fingerprint)  # trusted, not downloaded
    assert capsys.readouterr().err == ""
    assert identify(url, {"sha256": "a" * 64, "fingerprint": "old"}) == (sha, fingerprint)


def test_missing_source_is_one_line_naming_the_url(cache, model_url):
    with pytest.raises(ConfigError, match=r"^source 'memory://.*/nothing': nothing there"):
        fetch(f"{model_url}/nothing")


def test_one_member_is_read_without_the_weights(cache, model_url):
    from alignflow.tasks.zoo.registry import model_config

    assert json.loads(read_member(f"{model_url}/m", "config.json"))["model_type"] == "llama"
    assert model_config(f"{model_url}/m")["torch_dtype"] == "bfloat16"
    assert not cache.exists()  # nothing fetched


def test_models_and_data_load_through_the_fetch(cache, model_url):
    from alignflow.tasks.data import load_dataset_spec
    from alignflow.tasks.zoo.registry import resolve_model

    assert resolve_model(f"{model_url}/m").startswith(str(cache))
    ds = load_dataset_spec(f"{model_url}/d.jsonl")
    assert ds["label"] == ["2"] and ds.info.dataset_name == f"{model_url}/d.jsonl"


CONFIG = {"actor": {"model_name_or_path": "URL/m/"}, "ref": {"model_name_or_path": "tiny-llama"},
          "reward": {"sources": ["acc=rule:gsm8k", "rm=URL/m", "f.py"]},
          "data": {"prompt_dataset": "alignflow:gsm8k,URL/d.jsonl"}}


def _config(url: str) -> dict:
    return json.loads(json.dumps(CONFIG).replace("URL", url))


def test_the_sources_of_a_config_are_its_urls_and_hub_ids(model_url):
    assert source_specs(_config(model_url)) == [
        ("actor.model_name_or_path", f"{model_url}/m"), ("reward.sources[1]", f"{model_url}/m"),
        ("data.prompt_dataset[1]", f"{model_url}/d.jsonl")]


def test_pins_record_each_source_and_refuse_changed_bytes_unless_named(cache, model_url):
    config = _config(model_url)
    pins = pin(config, run_id="r")
    sha = fetch(f"{model_url}/m").sha256
    assert pins.record["actor.model_name_or_path"]["sha256"] == sha
    assert pins.allowed.sources[f"{model_url}/m"] == sha
    fsspec.filesystem("memory").pipe(f"{model_url[len('memory://'):]}/d.jsonl", b'{"input": "x"}\n')
    with pytest.raises(Untrusted) as err:
        pin(config, pins.record, run_id="r")
    line = str(err.value)
    assert "\n" not in line and line.startswith("run 'r': data.prompt_dataset[1]: source ")
    old = pins.record["data.prompt_dataset[1]"]["sha256"]
    assert f"recorded sha256 {old[:16]}…" in line and f"--trust {model_url}/d.jsonl" in line
    again = pin(config, pins.record, named=[f"{model_url}/d.jsonl"], run_id="r")
    assert again.record["data.prompt_dataset[1]"]["sha256"] != old and len(again.notes) == 1


def test_hf_tokens_are_masked(monkeypatch):
    from alignflow.artifacts.redact import redact

    token = "hf_" + "A1b2C3d4" * 5
    monkeypatch.setenv("HF_TOKEN", token)
    assert token not in redact(f"401 for token {token}")
    monkeypatch.delenv("HF_TOKEN")
    assert redact(f"Authorization failed: {token} rejected") == \
        "Authorization failed: hf_*** rejected"
