"""Every `alignflow` command that docs/, infra/, the examples and the README (its commands
other than `run`, which tests/fast/test_readme_runs.py dry-runs) show works as written:
`run` and `campaign start|tick` with `--dry-run`, the others for real against a store
holding small finished runs. Placeholders (`RUN_ID`, `DIR`, `CONFIG`, ...) get stand-ins;
options that name a cluster or a store (`--address`, `--store`) are replaced by the test's
store, since none is here. So the documentation cannot drift from the code again."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from alignflow.cli import main
from alignflow.flows.campaign import control
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from alignflow.flows.loader import load_flow
from tests.doc_commands import ROOT, DocCommand, commands
from tests.rl.conftest import rl_sets  # noqa: F401 - the small GRPO run's settings

pytestmark = pytest.mark.slow
RUN = "r"
RUN_NAMES = {"RUN", "RUN_ID", "R", "<run_id>", "ID"}
LORA = ["ds.lora.rank=8", "ds.lora.alpha=32", "train.max_iterations=4"]
SCRIPT = ROOT / "tests/fixtures/openrlhf_scripts/02_grpo_rule_reward_flat.sh"


def _documented() -> list[DocCommand]:
    """The commands to run: one per distinct argv, README `run` lines left out."""
    seen, out = set(), []
    for c in commands():
        same = tuple(RUN if w in RUN_NAMES else w for w in c.argv)  # `resume RUN_ID`, `resume R`
        if c.where.startswith("README") and c.command == "run" or same in seen:
            continue
        seen.add(same)
        out.append(c)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory, rl_sets, tiny_model_dir):  # noqa: F811
    """(store, folder): a finished LoRA GRPO run `r` (4 iterations, inline), a tiny
    campaign config, and the folder commands run in (the examples linked in)."""
    here = tmp_path_factory.mktemp("docs")
    store = here / "store"
    flow, cls = load_flow("grpo")
    api.run(flow, load_config(cls, sets=[*rl_sets, *LORA]), store=str(store), run_id=RUN,
            executor="inline")
    (here / "examples").symlink_to(ROOT / "examples")
    (here / "infra").symlink_to(ROOT / "infra")
    gate = here / "gate.jsonl"
    gate.write_text("".join(json.dumps({"question": f"say e {i}", "label": "e"}) + "\n"
                            for i in range(4)))
    (here / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "tiny", "flow": "grpo", "schedule": {"every": "1h"},
        "config": {"actor": {"model_name_or_path": str(tiny_model_dir)},
                   "rollout": {"n_samples_per_prompt": 2},
                   "reward": {"sources": ["rule:target:e"]}},
        "gate": {"prompts": str(gate), "rewards": ["rule:target:e"], "max_samples": 4,
                 "max_new_tokens": 4, "apply_chat_template": False}}))
    store_ = api.open_store(str(store))  # campaign `tiny` exists: its gate ran, round 0 paused
    store_.write_json(control.control_path("campaign-tiny"), {"paused": True})
    assert main(["campaign", "tick", str(here / "campaign.yaml"), "--store", str(store)]) == 0
    return store, here


@pytest.fixture(scope="module")
def manifest_sources(s3_server, tiny_model_dir, tmp_path_factory):
    """The models and data the KubeRay manifests' commands name, on moto's S3 server (the
    endpoint is an address: the test's), fetched into a cache of the test's own."""
    from tests.infra.manifests import upload_manifest_sources

    upload_manifest_sources(s3_server, tiny_model_dir)
    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "ALIGNFLOW_SOURCES_DIR")}
    os.environ.update(AWS_ENDPOINT_URL=s3_server,
                      ALIGNFLOW_SOURCES_DIR=str(tmp_path_factory.mktemp("sources")))
    yield
    for key, value in saved.items():
        os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


def _fill(argv: tuple[str, ...], store: Path, here: Path) -> list[str]:
    """The documented argv with stand-ins for its placeholders and this test's store."""
    out, skip = [], False
    for i, word in enumerate(argv):
        if skip:
            skip = False
            continue
        if word in ("--address", "--store") and not (argv[0] == "run" and argv[i + 1] == "auto"):
            skip = True
            continue
        out.append({"FLOW": "grpo", "DIR": str(here / f"out-{len(list(here.iterdir()))}"),
                    "RUN_A": RUN, "RUN_B": "campaign-tiny",
                    "CONFIG": str(here / "campaign.yaml"), "SCRIPT.sh": str(SCRIPT),
                    "/config/campaign.yaml": str(ROOT / "infra/campaign/campaign.yaml"),
                    "KEY=VALUE": "logger.sample_rows=4"}.get(
            word, RUN if word in RUN_NAMES else word))
    return _complete(out, here) + (["--store", str(store)] if out[0] not in (
        "translate", "models") else [])


def _complete(argv: list[str], here: Path) -> list[str]:
    """What a prose mention of a command leaves to the reader: its run, flow or config."""
    cmd, rest = argv[0], argv[1:]
    if cmd == "run":  # a manifest's GPUs are not here: its plan is checked in tests/infra
        gpus = ["--ignore-hardware"] if any("num_gpus" in w for w in rest) else []
        return ["run", *(["grpo"] if not rest or rest[0].startswith("-") else []), *rest,
                "--dry-run", *gpus]
    if cmd in ("report", "resume", "export", "cancel", "delete") and not rest:
        return [cmd, RUN]
    if cmd == "models" and rest[:1] == ["prepare"]:
        return ["models", "prepare", "tiny-llama" if rest[1:] == ["NAME"] else rest[1]]
    if cmd == "campaign" and rest[:1] in (["start"], ["tick"]):
        return ["campaign", rest[0], rest[1] if rest[1:] else str(here / "campaign.yaml"),
                "--dry-run"]
    if cmd == "campaign" and rest[:1] == ["status"]:
        return ["campaign", "status", "tiny"]
    return argv


def _interrupted(store: Path) -> None:
    """Make `r` resumable again (its export not committed, its driver gone)."""
    (store / "runs" / RUN / "tasks" / "export.json").unlink(missing_ok=True)
    runs.update_run(api.open_store(str(store)), RUN, status=runs.RUNNING)


DOCUMENTED = _documented()
LAST = ("cancel", "delete")  # they end the run the others use


@pytest.mark.parametrize("doc", sorted(DOCUMENTED, key=lambda c: c.command in LAST),
                         ids=lambda c: f"{c.where} {' '.join(c.argv)[:60]}")
def test_documented_command_works(doc, site, manifest_sources, monkeypatch, capsys):
    store, here = site
    monkeypatch.chdir(here)
    monkeypatch.setattr(sys, "stdin", io.StringIO(".quit\n"))  # `alignflow sql`: the shell
    argv = _fill(doc.argv, store, here)
    if argv[0] == "resume":
        _interrupted(store)
    for old in here.glob("report-*.html"):  # `report RUN_ID` writes into the folder it runs in
        old.unlink()
    if argv[0] in LAST:
        shutil.copytree(store / "runs" / RUN, store / "runs" / "x", dirs_exist_ok=True)
        copy = store / "runs" / "x" / "run.json"  # a run is named by its own folder
        copy.write_text(json.dumps(dict(json.loads(copy.read_text()), run_id="x")))
        argv = [a if a != RUN else "x" for a in argv]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, f"{doc.where}: alignflow {' '.join(argv)}\n{out[-2000:]}\n{err[-2000:]}"
