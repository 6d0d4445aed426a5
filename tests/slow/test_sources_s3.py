"""A run trains from a model folder and a JSONL data set on S3 (moto's server: a real S3
endpoint): the driver fetches each once into this node's content cache and pins its hash in
run.json; a second run finds both cached (no download); an object changed since is
refused on resume in one line naming the key, the URL and both hashes, and accepted once
named again (`--trust URL`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from alignflow.artifacts.store import Store
from alignflow.flows.journal import runs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def grpo_sets(model: str, data: str) -> list[str]:
    """One tiny GRPO iteration on GSM8K prompts with their labels, rule reward."""
    sets = [f"actor.model_name_or_path={model}", f"data.prompt_dataset={data}",
            "data.input_key=question", "data.label_key=label", "reward.sources=[rule:gsm8k]",
            "rollout.batch_size=4", "rollout.n_samples_per_prompt=2",
            "rollout.max_new_tokens=8", "train.batch_size=8", "train.micro_batch_size=4",
            "train.max_iterations=1", "num_threads=1"]
    return [a for s in sets for a in ("--set", s)]


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "alignflow.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def env(s3_server, tmp_path):
    return dict(os.environ, AWS_ENDPOINT_URL=s3_server, ALIGNFLOW_STORE=str(tmp_path / "store"),
                ALIGNFLOW_SOURCES_DIR=str(tmp_path / "sources"))


def test_a_run_trains_from_s3_caches_and_refuses_changed_bytes(env, s3_sources, s3_server):
    model, data = s3_sources
    first = cli(env, "run", "grpo", *grpo_sets(model, data), "--run-id", "r0")
    assert first.returncode == 0, first.stderr
    fetched = [line for line in first.stderr.splitlines() if "alignflow: fetched s3://" in line]
    assert len(fetched) == 2, first.stderr  # the data set and the model, once each
    store = Store.open(env["ALIGNFLOW_STORE"])
    pins = runs.read_run(store, "r0")["sources"]
    assert set(pins) == {"actor.model_name_or_path", "data.prompt_dataset"}
    assert pins["actor.model_name_or_path"]["url"] == model

    second = cli(env, "run", "grpo", *grpo_sets(model, data), "--run-id", "r1")
    assert second.returncode == 0, second.stderr
    assert "alignflow: fetched" not in second.stderr  # the cache, keyed by content
    assert runs.read_run(store, "r1")["sources"] == pins

    import s3fs

    s3fs.S3FileSystem(endpoint_url=s3_server, skip_instance_cache=True).pipe(
        data[len("s3://"):], b'{"question": "1+1?", "answer": "#### 2", "label": "2"}\n')
    refused = cli(env, "resume", "r0", "--rerun-from", "iter-0000/generate")
    assert refused.returncode == 2, refused.stderr
    *fetch_lines, line = refused.stderr.strip().splitlines()  # the new bytes, hashed: refused
    assert [f"alignflow: fetched {data}:" in f for f in fetch_lines] == [True]
    assert line.startswith("error: run 'r0': data.prompt_dataset: source ")
    recorded = pins["data.prompt_dataset"]["sha256"]
    assert f"'{data}' changed since the run recorded it (recorded sha256 {recorded[:16]}…" in line
    assert f"--trust {data}" in line

    named = cli(env, "resume", "r0", "--rerun-from", "iter-0000/generate", "--trust", data)
    assert named.returncode == 0, named.stderr
    assert "note: run r0: data.prompt_dataset: source" in named.stderr
    assert runs.read_run(store, "r0")["sources"]["data.prompt_dataset"]["sha256"] != recorded
