"""Every config key and flag the README and the docs name exists in a built-in flow's config,
so the docs cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

from alignflow.flows.compat.table import BEGIN, END
from alignflow.flows.config import load_config
from alignflow.flows.config.sources import Keys, flatten, read_yaml
from alignflow.flows.config.types import aliases, config_paths
from alignflow.flows.loader import load_flow
from alignflow.flows.registry import BUILTIN

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SECTIONS = ("actor", "critic", "ref", "reward", "rollout", "train", "algo", "data", "eval",
            "ckpt", "ds", "adam", "model", "teacher", "placement", "async", "agent")
KEY = re.compile(r"`((?:" + "|".join(SECTIONS) + r")\.[a-z_][a-z0-9_.]*)")
SET = re.compile(r"--set[ =]([a-z_][a-z0-9_.]*)=")
RUN_OPTIONS = {"config", "set", "run-id", "seed", "executor", "help-config", "store",
               "address", "debug", "rerun-from", "force", "all", "detach", "dry-run",
               "cluster", "simulate-cluster", "supervise", "max-restarts", "help"}


FILES = (".py", ".sql", ".json", ".yaml", ".md", ".parquet", ".safetensors")


def _known() -> set[str]:
    """Canonical dotted keys, and their aliases (OpenRLHF 0.9's flat flags, alignflow's
    earlier key names, which the docs name where they say so)."""
    names: set[str] = set()
    for flow in BUILTIN:
        _, cls = load_flow(flow)
        names |= set(config_paths(cls)) | set(aliases(cls))
    return names


def _run_flags(text: str) -> set[str]:
    """Flags on `alignflow run ...` command lines (continuations included)."""
    flags: set[str] = set()
    for line in re.findall(r"alignflow run [^\n]*(?:\\\n[^\n]*)*", text):
        flags |= {f for f in re.findall(r"--([a-z][a-z0-9_.-]*)", line) if f not in RUN_OPTIONS}
    return flags


def _written(text: str) -> str:
    """The text less docs/openrlhf.md's generated flag table, which names the keys alignflow
    lacks on purpose (tests/fast/test_openrlhf_flags.py checks it against the code)."""
    head, _, rest = text.partition(BEGIN)
    return head + rest.partition(END)[2]


def test_keys_and_flags_in_the_docs_exist():
    known = _known()
    missing = []
    for doc in DOCS:
        text = _written(doc.read_text())
        named = set(KEY.findall(text)) | set(SET.findall(text)) | _run_flags(text)
        named = {k.rstrip(".") for k in named if not k.endswith(FILES)}
        missing += [f"{doc.name}: {k}" for k in sorted(named) if k not in known]
    assert not missing, "keys named in the docs that no config has:\n" + "\n".join(missing)


def test_example_configs_load_in_their_flow():
    """Each `examples/*.yaml` names its flow (`alignflow run FLOW --config ...`) and loads
    there with canonical keys only."""
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        flow = re.search(r"alignflow run (\w+) --config", path.read_text()).group(1)
        _, cls = load_flow(flow)
        keys = Keys.of(cls, {})
        over: dict = {}
        flatten(keys, read_yaml(path), str(path), over)  # no aliases: canonical names only
        load_config(cls, config_file=path)
