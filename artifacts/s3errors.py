"""Turn botocore / s3fs / aiohttp failures (and a full disk, a read-only or forbidden local
folder) into one-line `StoreError`s that name the store and the path.

s3fs already maps most S3 answers onto builtins (403 → PermissionError, 404 →
FileNotFoundError); what is left are connection errors and missing credentials, which
arrive as botocore or aiohttp exceptions. A missing key stays a `FileNotFoundError`.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator

from alignflow.errors import AlignflowError, StoreError

_CONNECT_NAMES = {
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ConnectionClosedError",
    "ClientConnectorError",
    "ServerDisconnectedError",
    "ReadTimeoutError",
}


def _store_error(message: str, *, user: bool) -> StoreError:
    err = StoreError(message)
    if user:
        err.kind = "user"
    return err


def _classify(exc: BaseException, url: str, rel: str) -> StoreError | None:
    where = f"{url.rstrip('/')}/{rel}" if rel else url
    text = str(exc)
    if getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or \
            "No space left on device" in text or "Disk quota exceeded" in text:
        return _store_error(f"no space left on the device of store {url} writing {where}; "
                            "free some space, then `alignflow resume` the run", user=True)
    local = _local_refusal(exc, url, rel or ".")
    if local is not None:
        return local
    chain = [exc, exc.__cause__, exc.__context__]
    names = {type(e).__name__ for e in chain if e is not None}
    if names & _CONNECT_NAMES or "Could not connect to the endpoint" in text:
        return _store_error(f"cannot reach the S3 endpoint for {where}: {text.splitlines()[0]}",
                            user=False)
    if "NoCredentialsError" in names or "Unable to locate credentials" in text:
        return _store_error(f"no AWS credentials for {where}; set AWS_ACCESS_KEY_ID/"
                            "AWS_SECRET_ACCESS_KEY or an AWS profile", user=True)
    if isinstance(exc, PermissionError):
        return _store_error(f"access denied to {where} (bad credentials or missing permission): "
                            f"{text}", user=True)
    if isinstance(exc, FileNotFoundError) and "bucket does not exist" in text.lower():
        bucket = url[len("s3://"):].split("/", 1)[0]
        return _store_error(f"S3 bucket {bucket!r} of {url} does not exist; create it or fix "
                            "the store URL", user=True)
    return None


def _local_refusal(exc: BaseException, url: str, rel: str) -> StoreError | None:
    """A local store on a read-only filesystem, or a folder of it this user may not change:
    the store, the path, and which commands still work."""
    code = getattr(exc, "errno", None)
    if code == errno.EROFS:
        return _store_error(f"store {url} is read-only (writing {rel}): this command writes "
                            "to the store; `ls`, `status`, `logs` and `sql` only read it", user=True)
    if code in (errno.EACCES, errno.EPERM) and "://" not in url.replace("file://", ""):
        why = getattr(exc, "strerror", None) or "permission denied"
        return _store_error(f"store {url}: permission denied on {rel} ({why}); run, "
                            "resume, delete and gc --delete need its folders writable by this "
                            "user, `ls`, `status` and `sql` only readable", user=True)
    return None


@contextlib.contextmanager
def translate_errors(url: str, rel: str = "") -> Iterator[None]:
    """Re-raise storage failures under `url`/`rel` as `StoreError` where they are ours to name."""
    try:
        yield
    except AlignflowError:
        raise
    except Exception as exc:
        err = _classify(exc, url, rel)
        if err is None:
            raise
        raise err from exc
