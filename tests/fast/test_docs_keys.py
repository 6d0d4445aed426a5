"""Every config key and flag the README and the docs name exists in a built-in flow's config,
so the docs cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

from alignflow.flows.config.types import aliases, config_paths
from alignflow.flows.loader import load_flow
from alignflow.flows.registry import BUILTIN

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SECTIONS = ("model", "placement", "data", "generate", "rewards", "algo", "optim", "loss")
KEY = re.compile(r"`((?:" + "|".join(SECTIONS) + r")\.[a-z_][a-z0-9_.]*)")
SET = re.compile(r"--set[ =]([a-z_][a-z0-9_.]*)=")
RUN_OPTIONS = {"config", "set", "run-id", "seed", "executor", "help-config", "store",
               "address", "debug", "rerun-from", "force", "all"}


FILES = (".py", ".sql", ".json", ".yaml", ".md", ".parquet", ".safetensors")


def _known() -> set[str]:
    """Canonical dotted keys, and the flat flag names (OpenRLHF's) that alias them; dotted
    aliases (keys renamed since) are for old runs and scripts, not for the docs."""
    names: set[str] = set()
    for flow in BUILTIN:
        _, cls = load_flow(flow)
        names |= set(config_paths(cls)) | {a for a in aliases(cls) if "." not in a}
    return names


def _run_flags(text: str) -> set[str]:
    """Flags on `alignflow run ...` command lines (continuations included)."""
    flags: set[str] = set()
    for line in re.findall(r"alignflow run [^\n]*(?:\\\n[^\n]*)*", text):
        flags |= {f for f in re.findall(r"--([a-z][a-z0-9_.-]*)", line) if f not in RUN_OPTIONS}
    return flags


def test_keys_and_flags_in_the_docs_exist():
    known = _known()
    missing = []
    for doc in DOCS:
        text = doc.read_text()
        named = set(KEY.findall(text)) | set(SET.findall(text)) | _run_flags(text)
        named = {k.rstrip(".") for k in named if not k.endswith(FILES)}
        missing += [f"{doc.name}: {k}" for k in sorted(named) if k not in known]
    assert not missing, "keys named in the docs that no config has:\n" + "\n".join(missing)
