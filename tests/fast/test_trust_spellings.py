"""Every config key whose value is a path or a URL, found from the config types (fields that
say what they refer to, and the keys that name what a run trains), against every spelling
that has fooled a string check: a URL-looking path, `file://`, `..`, `~`, a link inside the
store, an absolute path, a Windows path, percent-encoding, an unknown scheme. A store's
unsigned run with any of them is refused in one line naming the key, before anything runs,
reads or writes outside the store (issue 40 §1-2). `drive` is replaced by a probe."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from alignflow.errors import AlignflowError
from alignflow.flows import registry
from alignflow.flows.config import load_config
from alignflow.flows.config.types import init_fields, key_of, section
from alignflow.flows.control import api, runner
from alignflow.flows.journal import codec
from alignflow.flows.loader import load_flow
from alignflow.flows.trust.config import IDENTITY_LEAVES, identity

SPELLINGS = {
    "url-looking": "{store}/x://../../outside/{name}",
    "file-url": "file://{outside}/{name}",
    "dot-dot": "{store}/../outside/{name}",
    "home": "~/{name}",
    "link-in-store": "{store}/link/{name}",
    "absolute": "{outside}/{name}",
    "windows": "C:\\..\\outside\\{name}",
    "percent": "file://{store}/%2e%2e/outside/{name}",
    "scheme": "x://{outside}/{name}",
}
TARGET = {"write_dir": "tb", "code": "evil.py", "data": "rows.jsonl", "model": "model"}
DATA_LEAVES = {"prompt_dataset", "dataset", "pretrain_data"}


def _keys(cls: type, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, what its value names) of every path-or-URL field of `cls`."""
    found = []
    for f, hint in init_fields(cls):
        key, sub = prefix + key_of(f), section(hint)
        if f.metadata.get("refers") in ("write_dir", "code"):
            found.append((key, f.metadata["refers"]))
        elif sub is not None:
            found += _keys(sub, f"{key}.")
        elif f.name in IDENTITY_LEAVES and f.name != "flow":
            found.append((key, "data" if f.name in DATA_LEAVES else "model"))
    return found


def _cases() -> list[tuple[str, str, str]]:
    """(flow, key, kind) for each key of every built-in flow's config, once."""
    seen: dict[str, tuple[str, str]] = {}
    for name in sorted(set(registry.BUILTIN) - {"campaign"}):  # its round flow: test_trust_boundary
        cls = load_flow(name)[1]
        for key, kind in _keys(cls) if cls else []:
            seen.setdefault(key, (name, kind))
    seen.setdefault("reward.sources", ("grpo", "code"))  # a reward spec: rule, URL, .py, model
    return [(flow, key, kind) for key, (flow, kind) in sorted(seen.items())]


CASES = _cases()


def test_the_keys_come_from_the_config_types():
    keys = {key for _, key, _ in CASES}
    assert {"logger.tensorboard_dir", "ckpt.output_dir", "train.agent_func_path",
            "data.prompt_dataset", "actor.model_name_or_path", "data.dataset"} <= keys
    assert len(keys) >= 12


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A store, a folder beside it holding a target of each kind, a link from the store to
    that folder, and a home whose targets are the same."""
    store, outside, home = tmp_path / "store", tmp_path / "outside", tmp_path / "home"
    for folder in (store, outside, home):
        folder.mkdir()
    (store / "link").symlink_to(outside)
    marker = tmp_path / "ran"
    for where in (outside, home):
        (where / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n"
                                       "def reward_func(q, p, l):\n    return [0.0] * len(q)\n")
        (where / "rows.jsonl").write_text('{"input": "local rows", "answer": "1"}\n')
        (where / "model").mkdir()
        (where / "model" / "config.json").write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ALIGNFLOW_TRUSTED_DIRS", raising=False)
    monkeypatch.setenv("ALIGNFLOW_TRUST_FILE", str(tmp_path / "no-trust.toml"))
    seen: list = []
    monkeypatch.setattr(runner, "_run_body", lambda *a, **kw: seen.append(1))
    return {"store": store, "outside": outside, "home": home, "marker": marker, "seen": seen}


def _stored(store: Path, flow: str, key: str, value: str) -> None:
    cls = load_flow(flow)[1]
    cfg = load_config(cls, sets=[f"{key}={value}"])
    meta = {"format": 1, "run_id": "r", "flow": flow, "flow_ref": flow,
            "config": codec.encode(cfg), "identity": codec.encode(identity(cfg)), "seed": 0,
            "status": "FAILED", "created": time.time(), "executor": "inline",
            "code": {"refs": []}}
    (store / "runs" / "r").mkdir(parents=True)
    (store / "runs" / "r" / "run.json").write_text(json.dumps(meta))


def _outside_written(world: dict) -> list[str]:
    before = {"evil.py", "rows.jsonl", "model"}
    return [p.name for where in (world["outside"], world["home"]) for p in where.iterdir()
            if p.name not in before]


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("flow,key,kind", CASES, ids=[k for _, k, _ in CASES])
def test_every_spelling_of_every_path_key_is_refused(world, flow, key, kind, spelling):
    value = SPELLINGS[spelling].format(store=world["store"], outside=world["outside"],
                                       name=TARGET[kind])
    try:
        _stored(world["store"], flow, key, value)
    except AlignflowError:
        return  # the config itself refuses the value: it can never be stored
    with pytest.raises(AlignflowError) as err:
        api.resume("r", store=str(world["store"]))
    message = str(err.value)
    assert key in message, message
    assert "Traceback" not in message and all(len(line) < 600 for line in message.splitlines())
    assert world["seen"] == [] and not world["marker"].exists()
    assert _outside_written(world) == []
