"""S3 failures come back as one-line StoreErrors naming the store URL or bucket."""

from __future__ import annotations

import socket
import time

import pytest

from alignflow.artifacts import Store, commit
from alignflow.errors import StoreError

pytestmark = pytest.mark.slow


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint(s3_server):
    port = _closed_port()
    store = Store.open("s3://bucket/p", storage_options={
        "endpoint_url": f"http://127.0.0.1:{port}",
        "config_kwargs": {"connect_timeout": 1, "retries": {"max_attempts": 1}}})
    start = time.time()
    with pytest.raises(StoreError, match=r"cannot reach the S3 endpoint for s3://bucket/p/"
                                         r"runs/r/run.json") as info:
        store.read_json("runs/r/run.json")
    assert "\n" not in str(info.value) and info.value.kind == "system"
    assert time.time() - start < 30


def test_missing_bucket(s3_server):
    store = Store.open("s3://no-such-bucket-af/p", storage_options={"endpoint_url": s3_server})
    with pytest.raises(StoreError, match=r"S3 bucket 'no-such-bucket-af' of "
                                         r"s3://no-such-bucket-af/p does not exist") as info:
        commit(store, "r", "t", {})
    assert info.value.kind == "user"
    with pytest.raises(StoreError, match="no-such-bucket-af"):
        store.read_json("runs/r/run.json")


def test_bad_credentials(s3_store, monkeypatch):
    from moto import settings

    s3_store.write_json("x.json", {"a": 1})
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # moto checks keys now
    bad = Store.open(s3_store.url, storage_options=s3_store.storage_options
                     | {"key": "AKIAWRONG", "secret": "wrong"})
    with pytest.raises(StoreError, match=rf"access denied to {s3_store.url}/x.json") as info:
        bad.read_json("x.json")
    assert info.value.kind == "user" and "\n" not in str(info.value)


def test_ls_and_sql_of_a_missing_bucket_fail_and_an_empty_prefix_is_an_empty_store(
        s3_server, s3_bucket, monkeypatch, capsys):
    from alignflow.cli import main

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    assert main(["ls", "--store", "s3://missing-bucket-af/x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: S3 bucket 'missing-bucket-af' of s3://missing-bucket-af/x does not "
                   "exist; expected a store written by alignflow (--store URL or "
                   "$ALIGNFLOW_STORE)")
    assert main(["sql", "SELECT 1", "--store", "s3://missing-bucket-af/x"]) == 2
    assert main(["ls", "--store", f"s3://{s3_bucket}/new"]) == 0
    assert "no runs in" in capsys.readouterr().out
