"""Mask secrets in error texts before they are written anywhere a user or a bucket can see.

Error messages and tracebacks end up in run.json, task logs, manifests and the catalog's
`runs` table, and from there in shared buckets and reports. A message can quote a URL with
a password, a command line with a token, or an exception that printed an environment
value. So every such text passes through `redact`, which replaces the value of each
environment variable whose name looks secret (`*KEY*`, `*SECRET*`, `*TOKEN*`,
`*PASSWORD*`, any case; values of 4+ characters that are not a number or a flag such as
`false`) with `<redacted $NAME>`, and the password of `scheme://user:pass@`
URLs with `***`. Lives in `artifacts` so every layer (the catalog too) may use it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD", re.IGNORECASE)
MIN_SECRET_LEN = 4  # shorter values ("1", "on") would mask ordinary words and numbers
# flags and numbers are settings, not secrets (TOKENIZERS_PARALLELISM=false matches *TOKEN*)
_NOT_SECRET = re.compile(r"(true|false|yes|no|on|off|none|null|[-+]?\d+(\.\d+)?)",
                         re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@")


def secret_values(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(name, value) of each secret-looking variable, longest value first (so a secret that
    contains another is masked whole)."""
    env = os.environ if environ is None else environ
    found = [(name, value) for name, value in env.items()
             if SECRET_NAME.search(name) and len(value.strip()) >= MIN_SECRET_LEN
             and not _NOT_SECRET.fullmatch(value.strip())]
    return sorted(found, key=lambda nv: -len(nv[1]))


def redact(text: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """`text` with secret environment values and URL passwords masked (None stays None)."""
    if not text:
        return text
    for name, value in secret_values(environ):
        if value in text:
            text = text.replace(value, f"<redacted ${name}>")
    return _URL_PASSWORD.sub(r"\g<head>***@", text)


def redact_tree(value: object, environ: Mapping[str, str] | None = None) -> object:
    """`redact` applied to every string inside JSON-like data (dicts, lists)."""
    if isinstance(value, str):
        return redact(value, environ)
    if isinstance(value, Mapping):
        return {k: redact_tree(v, environ) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v, environ) for v in value]
    return value
