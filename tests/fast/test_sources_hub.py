"""Hub ids as sources: resolved from a local HF cache folder when offline (a fixture builds
the `HF_HUB_CACHE` layout), pinned by content like a URL and loaded by every node at the
pinned commit, even after the branch moved. Online downloads:
tests/slow/test_sources_hub_online.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignflow.artifacts.sources import SourceChanged, fetch
from alignflow.artifacts.sources.hashing import content_hash, inventory
from alignflow.errors import ConfigError
from alignflow.flows.trust.sources import pin
from tests.fixtures.sources import HUB_ID, build_hub_cache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_SOURCES_DIR", str(tmp_path / "sources"))


def test_a_hub_id_resolves_from_the_local_cache_offline(hub_cache, cache, tiny_model_dir):
    from alignflow.tasks.zoo.registry import model_config, resolve_model

    folder = Path(resolve_model(HUB_ID))
    assert folder.parent.name == "snapshots" and str(folder).startswith(str(hub_cache))
    assert (folder / "config.json").read_bytes() == (tiny_model_dir / "config.json").read_bytes()
    got = fetch(HUB_ID)
    assert got.fingerprint == folder.name  # the commit
    assert got.sha256 == content_hash(inventory(folder))
    assert model_config(HUB_ID)["model_type"] == "llama"


def test_an_uncached_hub_id_is_one_line(hub_cache, cache):
    from alignflow.tasks.zoo.registry import resolve_model

    with pytest.raises(ConfigError, match=r"^model 'nobody/here' is not a local path, .* not in "
                                          r"the local Hugging Face cache \(offline"):
        resolve_model("nobody/here")


def _moved_branch(hub_cache: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    """`main` now points at a commit with another generation_config.json."""
    changed = tmp_path / "changed"
    changed.mkdir()
    for p in tiny_model_dir.iterdir():
        if p.is_file():
            (changed / p.name).write_bytes(p.read_bytes())
    (changed / "generation_config.json").write_text('{"max_length": 7}')
    build_hub_cache(hub_cache, changed)


def test_a_run_keeps_its_commit_when_the_branch_moves_unless_named_again(
        hub_cache, cache, tmp_path, tiny_model_dir):
    config = {"actor": {"model_name_or_path": HUB_ID}}
    pins = pin(config, run_id="r")
    recorded = pins.record["actor.model_name_or_path"]
    value = pins.allowed.sources[HUB_ID]
    assert value == f"{recorded['sha256']}@{recorded['fingerprint']}"
    _moved_branch(hub_cache, tmp_path, tiny_model_dir)
    assert fetch(HUB_ID).sha256 != recorded["sha256"]  # the branch's head now
    assert fetch(HUB_ID, value).path.name == recorded["fingerprint"]  # a node: the pinned commit
    again = pin(config, pins.record, run_id="r")  # a resume: the pinned commit, no refusal
    assert again.record == pins.record and not again.notes
    named = pin(config, pins.record, named=[HUB_ID], run_id="r")  # named again: the branch
    assert named.record["actor.model_name_or_path"]["sha256"] != recorded["sha256"]
    assert "changed since the run recorded it" in named.notes[0]
    with pytest.raises(SourceChanged, match="recorded sha256 0000000000000000…"):
        fetch(HUB_ID, "0" * 64)  # a node held to bytes this commit does not have
