"""Which strings name a source fetched from elsewhere: a URL the store layer reads
(`s3://bucket/key`, `memory://` in one process) or a Hugging Face Hub id (`org/name`).

Short names (`tiny-llama`), local paths (a shared volume: read in place) and `alignflow:`
data sets are not sources: they need no fetch and are not pinned here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

URL_PREFIXES = ("s3://", "memory://")  # what `artifacts/urls.py` opens besides local paths
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # the Hub's `org/name`

Kind = Literal["url", "hub"]


def is_url(spec: str) -> bool:
    """A URL of the store layer (`s3://`, `memory://`): fetched into the node's cache."""
    return spec.startswith(URL_PREFIXES)


def is_hub_id(spec: str) -> bool:
    """`org/name` that is no local path: a Hugging Face Hub model id."""
    return bool(HUB_ID.fullmatch(spec)) and not spec.startswith((".", "~")) \
        and not Path(spec).exists()


def model_source(spec: str) -> Kind | None:
    """What a model key's value names: a URL, a Hub id, or neither (None: a short name, a
    local path)."""
    if is_url(spec):
        return "url"
    return "hub" if is_hub_id(spec) else None


def normal(spec: str) -> str:
    """One spelling per source: surrounding space and a URL's trailing slash dropped."""
    spec = spec.strip()
    return spec.rstrip("/") if is_url(spec) else spec
