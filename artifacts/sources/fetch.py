"""The one way a model or data set from elsewhere reaches this node: `fetch(spec)`.

A URL is listed; when this node already holds the content that listing identified (the
index), or the content the run pinned (its hash names a cache folder), nothing is
downloaded. Otherwise the files are downloaded once (one fetch per URL at a time on a
node), hashed, and kept under their content hash. A run pins every source's hash when it
starts (`flows/trust/sources.py`); a node whose fetch gives other bytes refuses them
(`SourceChanged`), so two nodes never train different weights under one name.
"""

from __future__ import annotations

from alignflow.artifacts import usercode
from alignflow.artifacts.redact import redact
from alignflow.artifacts.sources import cache, hub, remote
from alignflow.artifacts.sources.cache import Fetched
from alignflow.artifacts.sources.kinds import is_url, normal
from alignflow.artifacts.sources.progress import Progress
from alignflow.errors import AlignflowError, ConfigError, Kind

__all__ = ["Fetched", "SourceChanged", "check_source", "fetch", "identify", "local_path",
           "pin_value", "read_member"]


class SourceChanged(AlignflowError, ValueError):
    """A source holds other bytes than the run recorded for it."""

    kind: Kind = "user"


def changed(spec: str, recorded: str, now: str, key: str | None = None) -> SourceChanged:
    where = f"{key}: " if key else ""
    return SourceChanged(
        f"{where}source {redact(spec)!r} changed since the run recorded it (recorded sha256 "
        f"{recorded[:16]}…, now {now[:16]}…); to train on the new bytes name it again "
        f"(alignflow resume RUN --trust {redact(spec)}, or the run's command again)")


def pin_value(spec: str, sha256: str, fingerprint: str) -> str:
    """What a run's workers are told of a source (`usercode.Allowances.sources`): its
    content hash, and for a Hub id the commit that holds it (`<sha256>@<commit>`)."""
    return sha256 if is_url(normal(spec)) else f"{sha256}@{fingerprint}"


def fetch(spec: str, expected: str | None = None) -> Fetched:
    """`spec` (a URL or a Hub id) on this node; with `expected` (a `pin_value`), those
    bytes or `SourceChanged`."""
    spec = normal(spec)
    sha, _, revision = (expected or "").partition("@")
    if is_url(spec):
        got = _url(spec, sha or None)
    else:
        got = hub.fetch_hub(spec, sha or None, revision or None)
    if sha and got.sha256 != sha:
        raise changed(spec, sha, got.sha256)
    return got


def local_path(spec: str) -> str:
    """Where `spec` is on this node, fetched if needed, held to the running run's pin."""
    return str(fetch(spec, usercode.pinned(normal(spec))).path)


def _url(url: str, expected: str | None) -> Fetched:
    if expected and (hit := cache.lookup(expected)) is not None:
        return Fetched(hit, expected, "")  # the pinned bytes are here: the source is not asked
    with cache.locked(url):
        found = remote.listing(url)
        known = cache.read_index(url)
        if known and known.get("fingerprint") == found.fingerprint:
            hit = cache.lookup(str(known.get("sha256")))
            if hit is not None:
                return Fetched(hit, known["sha256"], found.fingerprint)
        progress = Progress(url, found.total, len(found.entries))
        with cache.staging() as tmp:
            remote.download(found, tmp, progress)
            got = cache.admit(tmp, url, found.fingerprint, found.single)
        progress.done(got.sha256, str(got.path))
        return got


def identify(spec: str, recorded: dict | None = None) -> tuple[str, str]:
    """(content sha256, fingerprint) of `spec` as the driver sees it now: when its listing
    is the one the run recorded, the recorded hash without a download; else fetched and
    hashed here (a Hub id: at the recorded commit, if any)."""
    spec, recorded = normal(spec), recorded or {}
    if not is_url(spec):
        got = hub.fetch_hub(spec, recorded.get("sha256"), recorded.get("fingerprint"))
        return got.sha256, got.fingerprint
    if recorded.get("fingerprint") and recorded.get("sha256"):
        found = remote.listing(spec)
        if found.fingerprint == recorded["fingerprint"]:
            return str(recorded["sha256"]), found.fingerprint
    got = _url(spec, None)
    return got.sha256, got.fingerprint


def check_source(spec: str, need: str | None = None) -> None:
    """Before anything starts: `spec` is reachable, exists and holds `need` (a model's
    config.json); `ConfigError` or `StoreError` in one line otherwise. Downloads nothing
    but `need` (of a Hub id)."""
    spec = normal(spec)
    if not is_url(spec):
        hub.read_hub_member(spec, need or "config.json")
        return
    found = remote.listing(spec)
    if need and not found.single and need not in found.entries:
        raise ConfigError(f"source {redact(spec)!r} holds no {need} ({len(found.entries)} "
                          f"files: {', '.join(sorted(found.entries)[:4])}…); expected an HF "
                          "model folder")


def read_member(spec: str, name: str) -> bytes:
    """One small file of a source folder (a model's config.json), without the rest."""
    spec = normal(spec)
    return remote.read_member(spec, name) if is_url(spec) else hub.read_hub_member(spec, name)
