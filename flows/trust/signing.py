"""run.json's trust records, signed with a key that never lives in the store.

What a resume may take on the run's word — the flow and config it started with, the code
it hashed, the sources it pinned, its Ray address — is worth only as much as the machine
that wrote it. A store writer can edit or drop any of it, so alignflow signs those fields
(HMAC-SHA256 over their canonical JSON) with this machine's key: `$ALIGNFLOW_SIGNING_KEY`
(hex; a cluster's machines share one through a secret), else the key file
(`$ALIGNFLOW_KEY_FILE`, default `~/.config/alignflow/signing.key`), made on first use with
mode 0600. A record that verifies is this machine's own say-so from when the run started;
one that is missing, edited, or signed by another key is the store's word alone, and
everything it names needs the local say-so again (`check.py`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from alignflow.errors import ConfigError

KEY_ENV = "ALIGNFLOW_SIGNING_KEY"
KEY_FILE_ENV = "ALIGNFLOW_KEY_FILE"
FIELD = "signature"
# run.json fields a resume trusts when they verify; the rest (status, times, errors, the
# plan) steer nothing outside the store and change without a signature.
SIGNED = ("run_id", "flow", "flow_ref", "config", "masked", "code", "identity", "sources",
          "address")


def key_file() -> Path:
    default = Path(os.environ.get("XDG_CONFIG_HOME", "~/.config")) / "alignflow" / "signing.key"
    return Path(os.environ.get(KEY_FILE_ENV) or default).expanduser()


def _from_env(text: str) -> bytes:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        key = b""
    if len(key) < 16:
        raise ConfigError(f"${KEY_ENV}: expected at least 32 hex digits (a 16-byte key or "
                          "longer), e.g. from `python -c 'import secrets; "
                          "print(secrets.token_hex(32))'`")
    return key


def _made(path: Path) -> bytes:
    """The key in `path`, made now if there is none (of two racing makers one wins)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    try:
        os.link(tmp, path)  # create-once: an existing key is never replaced
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return _from_env(path.read_text())


def machine_key() -> bytes | None:
    """This machine's signing key (None when it cannot be read or made: runs go unsigned,
    and their resumes ask for the say-so)."""
    if os.environ.get(KEY_ENV):
        return _from_env(os.environ[KEY_ENV])
    path = key_file()
    try:
        return _from_env(path.read_text()) if path.is_file() else _made(path)
    except (OSError, ConfigError):
        return None


def key_id(key: bytes) -> str:
    """A short public name of a key: which machine signed, never the key."""
    return hashlib.sha256(b"alignflow-key-id\0" + key).hexdigest()[:16]


def _canonical(meta: dict) -> bytes:
    body = {name: meta.get(name) for name in SIGNED}
    plain = json.loads(json.dumps(body))  # tuples → lists, keys → strings: as read back
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _mac(key: bytes, meta: dict) -> str:
    return hmac.new(key, b"alignflow-run\0" + _canonical(meta), hashlib.sha256).hexdigest()


def sign(meta: dict) -> dict[str, str] | None:
    """run.json's `signature` field for `meta` (None: this machine has no key)."""
    key = machine_key()
    return None if key is None else {"key": key_id(key), "hmac_sha256": _mac(key, meta)}


def signed(meta: dict) -> dict:
    """`meta` with its signature (or without one, said once, where this machine has no
    key: then its resumes ask for the say-so)."""
    signature = sign(meta)
    if signature is None:
        print(f"note: run {meta.get('run_id')}: not signed: this machine has no signing key "
              f"({key_file()} cannot be read or made; or set ${KEY_ENV}), so resuming it "
              "will ask for the say-so on what it names", file=sys.stderr)
    return dict(meta, **{FIELD: signature}) if signature else dict(meta)


def verdict(meta: dict) -> str | None:
    """None when `meta`'s trust records verify with this machine's key, else why not."""
    found: Any = meta.get(FIELD)
    if not isinstance(found, dict) or not isinstance(found.get("hmac_sha256"), str):
        return "its record carries no signature of this machine"
    key = machine_key()
    if key is None:
        return f"this machine has no signing key ({key_file()} cannot be read or made)"
    if found.get("key") != key_id(key):
        return "its record was signed by another machine's key"
    try:
        expected = _mac(key, meta)
    except (TypeError, ValueError):
        return "its record holds values that cannot be signed"
    if not hmac.compare_digest(expected, found["hmac_sha256"]):
        return "its record was changed after this machine signed it"
    return None
