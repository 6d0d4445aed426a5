"""On S3 a read is bounded by one ranged GET (issue 20 §4): a file past its kind's limit is
refused after at most limit + 1 bytes, named in one line; an empty object still reads."""

from __future__ import annotations

import pytest

from alignflow.artifacts import bounds
from alignflow.errors import StoreFileRefused

pytestmark = pytest.mark.slow


def test_s3_reads_are_bounded_by_a_ranged_get(s3_store):
    s3_store.write_bytes("runs/a/empty.log", b"")
    assert s3_store.read_bytes("runs/a/empty.log") == b""
    s3_store.write_bytes("runs/a/run.json", b" " * (bounds.RECORD_BYTES + 5))
    with pytest.raises(StoreFileRefused, match=r"/runs/a/run\.json is more than 4 MiB; a file "
                                               r"of this kind is at most 4 MiB \(not read\)$"):
        s3_store.read_json("runs/a/run.json")
    got = s3_store.read_many(["runs/a/run.json", "runs/a/empty.log"])
    assert isinstance(got["runs/a/run.json"], StoreFileRefused)
    assert got["runs/a/empty.log"] == b""
    s3_store.write_bytes("runs/a/deep.json", b"[" * 1000 + b"]" * 1000)
    with pytest.raises(StoreFileRefused, match="nests JSON more than 128 levels deep"):
        s3_store.read_json("runs/a/deep.json")
