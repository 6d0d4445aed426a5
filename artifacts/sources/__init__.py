"""Models and data from where clusters keep them: `s3://` URLs (any URL the store layer
reads) and Hugging Face Hub ids, fetched once per node into a local cache keyed by their
content, and checked against the content hash the run recorded.

    kinds.py     which strings name a source (a URL, a Hub id), and which do not
    hashing.py   a folder's content hash: sha256 over its sorted (path, file sha256) list
    cache.py     this node's content cache: a folder per content hash, an index per URL
    remote.py    listing and downloading a URL through the store layer
    progress.py  a line every few seconds while a download runs
    hub.py       Hub ids: the local HF cache offline, a download once per node online
    fetch.py     the one entry: a source → its local path, checked against the run's pin

It lives in `artifacts` because both sides need it: the driver (the engine, which never
imports `tasks`) pins a run's sources before anything starts, and every node fetches them
where its models and data load (`tasks/zoo`, `tasks/data`).
"""

from alignflow.artifacts.sources.fetch import (
    Fetched,
    SourceChanged,
    check_source,
    fetch,
    identify,
    local_path,
    read_member,
)
from alignflow.artifacts.sources.kinds import is_hub_id, is_url, model_source

__all__ = ["Fetched", "SourceChanged", "check_source", "fetch", "identify", "is_hub_id",
           "is_url", "local_path", "model_source", "read_member"]
