"""A config value that names a place, parsed once into what will actually be opened.

A string is a URL only when it parses as one (`scheme://...` with a scheme alignflow
speaks); anything else is a local path, expanded (`~`), made absolute and normalised, so
`<store>/x://../../out` is the folder `out` beside the store, as the filesystem would open
it, not a URL of scheme `<store>/x`. A `file://` URL is percent-decoded into its path. The
trust check (`flows/trust/check.py`) and the writers (`Store.local_folder`, TensorBoard)
take the same `Location`, so what was confirmed is what is written: a place inside the
store is made from the store's root through no link (a link there is refused, wherever it
points); a place outside it is judged where it resolves through its links (`real_path`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from alignflow.errors import ConfigError

# Schemes alignflow reads, writes or sends to: the store layer's, HTTP reward servers,
# Ray's client. Any other `x://` is refused by name, never guessed at.
URL_SCHEMES = frozenset({"s3", "memory", "http", "https", "ray"})
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@dataclass(frozen=True)
class Location:
    """`kind` local: `text` is an absolute path with no `.`, `..` or `//` left in it (its
    links not followed); kind url: `text` is the URL as given, `scheme` its lower-cased
    scheme."""

    kind: Literal["local", "url"]
    text: str
    scheme: str = ""

    def inside(self, root: str) -> bool:
        """Is this local place `root` itself or below it?"""
        return self.kind == "local" and relative_inside(self.text, root) is not None


def relative_inside(path: str, root: str) -> str | None:
    """`path` (absolute, normalised) relative to `root` — spelled as given or resolved —
    when it is `root` itself (".") or below it; None when it lies elsewhere."""
    for base in (absolute(root), real_path(root)):
        if path == base or path.startswith(base.rstrip("/") + "/"):
            return os.path.relpath(path, base)
    return None


def link_on_the_way(path: str, root: str) -> str | None:
    """The first link (or other non-folder) between `root` and `path` — a place inside the
    store that the store's writer would refuse — or None."""
    rel = relative_inside(path, root)
    base = absolute(root) if relative_inside(path, absolute(root)) is not None else \
        real_path(root)
    for part in ([] if rel in (None, ".") else rel.split(os.sep)):
        base = os.path.join(base, part)
        if os.path.islink(base) or (os.path.lexists(base) and not os.path.isdir(base)):
            return base
    return None


def absolute(path: str) -> str:
    """`path` expanded, absolute and normalised, its links not followed."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(path)))


def real_path(path: str) -> str:
    """`path` expanded and resolved through every link, as `open` would reach it."""
    return os.path.realpath(os.path.expanduser(path))


def parse_location(value: str, key: str = "value", *, local_only: bool = False) -> Location:
    """The place `value` names; `ConfigError` naming `key` for a URL of a scheme alignflow
    does not speak, a `file://` URL naming another host, or (with `local_only`) any URL."""
    value = value.strip()
    match = _SCHEME.match(value)
    if match is None:
        return Location("local", absolute(value))
    scheme = match.group(1).lower()
    if scheme == "file":
        parts = urlsplit(value)
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"{key}: {value!r} is a file:// URL of host {parts.netloc!r}; "
                              "expected a path on this machine (file:///path)")
        return Location("local", absolute(unquote(parts.path) or "/"))
    if scheme not in URL_SCHEMES or local_only:
        want = "a local folder (a path or file:///path)" if local_only else \
            f"a local path or a URL of {', '.join(sorted(URL_SCHEMES | {'file'}))}"
        raise ConfigError(f"{key}: {value!r} is a URL of scheme {scheme!r}, which alignflow "
                          f"does not {'write to here' if local_only else 'speak'}; expected "
                          f"{want}")
    return Location("url", value, scheme)


def local_folder(value: str, key: str = "value") -> str:
    """The local folder a write key names (`parse_location(local_only=True)`)."""
    return parse_location(value, key, local_only=True).text
