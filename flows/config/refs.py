"""What a config names outside alignflow: code to run, URLs to send data to, folders to
write. One walk of the typed config finds them all, for the trust check of a stored run.

A field says what its value names with `metadata={"refers": KIND}`; a section whose values
name several kinds (reward specs: a rule, a URL, a `.py` file or a model) answers itself
with a `references()` method, parsed by the same function that builds what it names, so the
check and the use can never read a value differently.

KIND is one of `code` (a `.py` file to import), `flow` (a flow reference: a built-in name,
`file.py:function` or `module:function`), `url` (a server that receives the run's data)
and `write_dir` (a folder the run writes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from alignflow.flows.config.types import key_of

Kind = Literal["code", "flow", "url", "write_dir"]
KINDS: tuple[Kind, ...] = ("code", "flow", "url", "write_dir")


@dataclass(frozen=True)
class Reference:
    """One thing a config names: its dotted key (with `[i]` for list items), kind, value."""

    key: str
    kind: Kind
    value: str


def references(config: Any, prefix: str = "") -> list[Reference]:
    """Every code file, flow, URL and write folder `config` (a config dataclass) names."""
    return list(_walk(config, prefix))


def _walk(obj: Any, prefix: str) -> Iterator[Reference]:
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return
    answer = getattr(obj, "references", None)
    if callable(answer):
        for key, kind, value in answer():
            yield Reference(f"{prefix}{key}", kind, value)
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        value, key = getattr(obj, f.name), f"{prefix}{key_of(f)}"
        kind = f.metadata.get("refers")
        if kind is not None:
            yield from _leaf(key, kind, value)
        else:
            yield from _walk(value, f"{key}.")


def _leaf(key: str, kind: Kind, value: Any) -> Iterator[Reference]:
    if isinstance(value, str) and value:
        yield Reference(key, kind, value)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _leaf(f"{key}[{i}]", kind, item)
