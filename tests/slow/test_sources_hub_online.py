"""A Hub id when online: each node downloads it once into its HF cache, with the token from
`$HF_TOKEN`, which is never stored. The Hub is a local HTTP server that answers the file
API `huggingface_hub` uses (tests/fixtures/hub_server.py); `HF_HUB_OFFLINE=0` and
`HF_ENDPOINT` point the real client at it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.hub_server import FakeHub
from tests.slow.test_sources_s3 import ROOT, grpo_sets

pytestmark = pytest.mark.slow

TOKEN = "hf_" + "Zq7" * 12


def _texts(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*")
                   if p.is_file() and p.suffix in (".json", ".log", ".jsonl", ".txt"))


def test_a_hub_id_downloads_once_per_node_with_the_token_never_stored(tiny_model_dir,
                                                                      tmp_path):
    store = tmp_path / "store"
    with FakeHub("acme/tiny", tiny_model_dir) as hub:
        env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0", HF_TOKEN=TOKEN,
                   HF_HUB_CACHE=str(tmp_path / "hf"), ALIGNFLOW_STORE=str(store),
                   ALIGNFLOW_SOURCES_DIR=str(tmp_path / "sources"))
        sets = grpo_sets("acme/tiny", "alignflow:gsm8k")
        for run_id in ("a", "b"):
            out = subprocess.run([sys.executable, "-m", "alignflow.cli", "run", "grpo", *sets,
                                  "--run-id", run_id, "--set", "data.max_samples=8"],
                                 env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stderr
            assert TOKEN not in out.stderr + out.stdout
        assert sorted(hub.downloads()) == sorted(hub.files)  # each file once, for both runs
        asked = [(path, auth) for _, path, auth in hub.requests if path.startswith(
            ("/api/models/", "/acme/tiny/resolve/"))]  # (not the client's own telemetry)
        assert asked and all(auth == f"Bearer {TOKEN}" for _, auth in asked), asked
    assert TOKEN not in _texts(store)
    pinned = json.loads((store / "runs/a/run.json").read_text())["sources"]
    assert pinned["actor.model_name_or_path"]["fingerprint"] == hub.commit
