"""What the user's own machine says a stored run may use: the only source of trust.

A stored config can name code, servers, folders and a Ray address; none of it acts unless
this machine confirms it, through
- items named on this command line (`--trust ITEM`, `--flow FILE.py:FUNCTION`, the files a
  local campaign CONFIG or `alignflow run` config names, `--address`): a file named there
  is accepted even if it changed since the run started (that is the user's fix);
- trusted places: directories (or files) in `$ALIGNFLOW_TRUSTED_DIRS` (separated by the
  OS path separator) and in the local trust file; code under them must still hash as the
  run recorded it;
- the local trust file (`$ALIGNFLOW_TRUST_FILE`, default
  `~/.config/alignflow/trust.toml`): `trust = [dirs, files, URLs, Ray addresses]` and
  `stores = [store URLs you own]`;
- `--trust-store` (or the store listed under `stores`): the store is the user's own, so
  what it recorded is trusted as recorded (code still only with an unchanged hash, and
  never a `module:function` import).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from alignflow.artifacts.locations import real_path as resolved
from alignflow.errors import ConfigError

ENV = "ALIGNFLOW_TRUSTED_DIRS"
FILE_ENV = "ALIGNFLOW_TRUST_FILE"


def is_url(item: str) -> bool:
    """A URL or Ray address (`scheme://...`), as opposed to a local path."""
    return "://" in item and item.split("://", 1)[0].isalpha()


@dataclass(frozen=True)
class Sayso:
    """What this machine confirms. `named`: resolved paths, `module:attr` texts and URLs
    given on this command line (or by this Python call); `places`: trusted directories and
    files; `urls`: trusted URLs and Ray addresses (a URL trusts every URL under it);
    `address`: the Ray address this command was given; `store`: the store is the user's."""

    named: frozenset[str] = frozenset()
    places: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    address: str | None = None
    store: bool = False

    def under_place(self, path: str) -> bool:
        return any(path == p or path.startswith(p.rstrip("/") + "/") for p in self.places)

    def named_here(self, path: str) -> bool:
        """`path` is, or lies under, a file or folder named on this command line."""
        return any(path == n or path.startswith(n.rstrip("/") + "/")
                   for n in self.named if n.startswith("/"))

    def url_ok(self, url: str) -> bool:
        return url in self.named or any(url == u or url.startswith(u.rstrip("/") + "/")
                                        for u in self.urls)

    def with_named(self, items: Iterable[str]) -> Sayso:
        """This say-so, with `items` named too (paths resolved, URLs and refs as given)."""
        extra = {_named_form(item) for item in items if item}
        return Sayso(self.named | extra, self.places, self.urls, self.address, self.store)


def _is_module_ref(item: str) -> bool:
    path, sep, _attr = item.rpartition(":")
    return bool(sep and path and not path.endswith(".py") and "/" not in path)


def _named_form(item: str) -> str:
    """How a named item is compared: URLs and `module:attr` as given, a flow
    `file.py:function` as its file, other paths resolved."""
    if is_url(item) or _is_module_ref(item):
        return item
    file, sep, _attr = item.rpartition(":")
    return resolved(file if sep and file.endswith(".py") else item)


def trust_file() -> Path:
    default = Path(os.environ.get("XDG_CONFIG_HOME", "~/.config")) / "alignflow" / "trust.toml"
    return Path(os.environ.get(FILE_ENV) or default).expanduser()


def _read_trust_file() -> tuple[list[str], list[str]]:
    """(trust items, owned stores) of the local trust file (none when there is no file)."""
    path = trust_file()
    if not path.is_file():
        return [], []
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"trust file {path}: cannot be read ({exc}); expected TOML with "
                          "trust = [...] and stores = [...]") from None
    lists = [data.get(k, []) for k in ("trust", "stores")]
    if not all(isinstance(v, list) and all(isinstance(i, str) for i in v) for v in lists):
        raise ConfigError(f"trust file {path}: 'trust' and 'stores' must be lists of strings")
    return lists[0], lists[1]


def local_sayso(trust: Iterable[str] = (), *, store_url: str | None = None,
                address: str | None = None, trust_store: bool = False,
                named: Iterable[str] = ()) -> Sayso:
    """The say-so of this command: its `--trust` items (named), `$ALIGNFLOW_TRUSTED_DIRS`,
    the trust file, its `--address` and `--trust-store`."""
    given = list(trust)
    env = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    listed, stores = _read_trust_file()
    items = given + env + listed
    places = tuple(resolved(p) for p in items if not is_url(p))
    urls = tuple(u for u in items if is_url(u))
    owned = trust_store or (store_url is not None and _owned(store_url, stores))
    return Sayso(frozenset(), places, urls, address, owned).with_named([*given, *named])


def _owned(store_url: str, stores: list[str]) -> bool:
    norm = [s if is_url(s) else resolved(s) for s in stores]
    url = store_url if is_url(store_url) and not store_url.startswith("file://") \
        else resolved(store_url.removeprefix("file://"))
    return url.rstrip("/") in {s.rstrip("/") for s in norm}


_ACTIVE: contextvars.ContextVar[Sayso | None] = contextvars.ContextVar(
    "alignflow_sayso", default=None)


def active() -> Sayso | None:
    """The say-so of the command now running (None: no run started yet in this call)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def in_force(sayso: Sayso) -> Iterator[Sayso]:
    """`sayso` holds for the runs started inside the block (a campaign's round runs)."""
    token = _ACTIVE.set(sayso)
    try:
        yield sayso
    finally:
        _ACTIVE.reset(token)
