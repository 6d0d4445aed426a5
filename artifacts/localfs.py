"""A local store root that no path leaves: below the root no symbolic link is followed, to
read, write, list or delete, and only regular files are read.

Every local operation of `Store` goes through `LocalRoot`. It walks from the root one
folder at a time with `openat(O_DIRECTORY | O_NOFOLLOW)`, so a link anywhere below the root
(`runs/<id>`, `runs/<id>/final`, `logs/`, the file itself) is refused with one line naming
it instead of followed, and the walk cannot be redirected between a check and its use.
Reads open the file `O_NOFOLLOW | O_NONBLOCK` (a FIFO opens without waiting for a writer),
accept only a regular file and read at most `limit` bytes. The root itself may be a link:
that is the user's own choice on the command line, not the store's.

Libraries that write or read by path (ParquetWriter, safetensors, `save_pretrained`, DuckDB)
get their path from `writable` / `readable`, checked the same way just before they use it.
Only a writer inside the store at that very moment could swap a folder for a link in
between; a store handed over as data cannot.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from typing import IO, NamedTuple

from alignflow.artifacts.bounds import too_big
from alignflow.errors import StoreFileRefused

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device",
          stat.S_IFBLK: "a device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def kind(mode: int) -> str:
    """`file`, or what else a store entry is (`a symbolic link`, `a FIFO`, ...)."""
    return "file" if stat.S_ISREG(mode) else _KINDS.get(stat.S_IFMT(mode), "not a file")


class Entry(NamedTuple):
    """One leaf of a listing: a regular file, or something a store must not hold (`kind`).
    A tuple: a listing at 10,000 tasks makes ~20,000."""

    kind: str
    size: int
    mtime: float


class LocalRoot:
    """The store folder `root` (shown as `url` in errors)."""

    def __init__(self, root: str, url: str) -> None:
        self.root, self.url = root, url.rstrip("/")

    def where(self, rel: str) -> str:
        return f"{self.url}/{rel}" if rel else self.url

    def _refused(self, rel: str, what: str, doing: str) -> StoreFileRefused:
        return StoreFileRefused(f"{self.where(rel)} is {what}; a store holds only regular files "
                                f"and folders, and alignflow never follows a link in it "
                                f"({doing} refused)")

    @contextlib.contextmanager
    def folder(self, rel_dir: str, *, create: bool = False, doing: str = "reading"
               ) -> Iterator[int]:
        """A descriptor of folder `rel_dir`, reached without following a link (and made,
        with its parents, when `create`)."""
        if create:
            os.makedirs(self.root, exist_ok=True)  # the root is the user's own choice
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            done: list[str] = []
            for name in [p for p in rel_dir.split("/") if p]:
                done.append(name)
                nxt = self._step(fd, name, "/".join(done), create, doing)
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def _step(self, fd: int, name: str, rel: str, create: bool, doing: str) -> int:
        """Open `name` under `fd` as a folder; a link or a file there is refused."""
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
            return os.open(name, _DIR, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                raise self._refused(rel, kind(mode), doing) from None
            if exc.errno == errno.ENOENT:
                raise FileNotFoundError(errno.ENOENT, f"no such file in the store: "
                                        f"{self.where(rel)}") from None
            raise

    @contextlib.contextmanager
    def parent(self, rel: str, *, create: bool = False, doing: str = "reading"
               ) -> Iterator[tuple[int, str]]:
        """(descriptor of `rel`'s folder, `rel`'s own name)."""
        folder, _, name = rel.strip("/").rpartition("/")
        with self.folder(folder, create=create, doing=doing) as fd:
            yield fd, name

    def lstat(self, rel: str) -> os.stat_result | None:
        """`rel`'s own status (a link is not followed), None when there is nothing."""
        try:
            with self.parent(rel) as (fd, name):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    @contextlib.contextmanager
    def open_regular(self, rel: str) -> Iterator[tuple[int, os.stat_result]]:
        """(descriptor, status) of regular file `rel`; anything else is refused, unread."""
        with self.parent(rel) as (dir_fd, name):
            try:
                fd = os.open(name, _READ, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                raise self._refused(rel, "a symbolic link", "reading") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._refused(rel, kind(info.st_mode), "reading")
            yield fd, info
        finally:
            os.close(fd)

    def open_file(self, rel: str) -> IO[bytes]:
        """Regular file `rel` open for reading (binary)."""
        with self.open_regular(rel) as (fd, _):
            return os.fdopen(os.dup(fd), "rb")

    def readable_size(self, rel: str) -> int:
        with self.open_regular(rel) as (_, info):
            return info.st_size

    def read(self, rel: str, limit: int) -> bytes:
        """The bytes of regular file `rel`; refused unread when it is over `limit`."""
        with self.open_regular(rel) as (fd, info):
            if info.st_size > limit:
                raise too_big(self.where(rel), info.st_size, limit)
            chunks, left = [], limit + 1
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 24))):
                chunks.append(chunk)
                left -= len(chunk)
        if left <= 0:  # it grew while being read
            raise too_big(self.where(rel), None, limit)
        return b"".join(chunks)

    def readable(self, rel: str, size: int | None = None) -> str:
        """The path of regular file `rel`, for a library that opens it by path; with `size`,
        it must have exactly that many bytes (what its manifest recorded)."""
        with self.open_regular(rel) as (_, info):
            if size is not None and info.st_size != size:
                raise StoreFileRefused(f"{self.where(rel)} has {info.st_size:,} bytes; its "
                                       f"manifest records {size:,} (changed after its commit; "
                                       "not read)")
        return os.path.join(self.root, rel)

    def writable(self, rel: str) -> str:
        """The path of `rel` for writing: its folders made without following a link, and
        `rel` itself not a link or other non-file."""
        with self.parent(rel, create=True, doing="writing") as (fd, name):
            self._check_target(fd, name, rel)
        return os.path.join(self.root, rel)

    def make_folder(self, rel: str) -> None:
        """Make folder `rel` (and its parents) without following a link."""
        with self.folder(rel, create=True, doing="writing"):
            pass

    def _check_target(self, fd: int, name: str, rel: str) -> None:
        try:
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISREG(mode):
            raise self._refused(rel, kind(mode), "writing")

    def write(self, rel: str, data: bytes, *, once: bool = False) -> bool:
        """Write `rel` atomically (fsynced temp + rename in the same folder); with `once`,
        only if it does not exist: temp, hard link (never replaces), temp removed, folder
        fsynced. False when it existed."""
        with self.parent(rel, create=True, doing="writing") as (fd, name):
            self._check_target(fd, name, rel)
            tmp = f".{name}.{os.urandom(8).hex()}.tmp"
            _write_temp(fd, tmp, data)
            try:
                if not once:
                    os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
                    return True
                try:
                    os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    return False
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=fd)
            _fsync_dir(fd)
            return True

    def move_in(self, local_path: str, rel: str) -> None:
        """Move the finished file `local_path` to `rel` (copied first when it lies on
        another disk)."""
        with self.parent(rel, create=True, doing="writing") as (fd, name):
            self._check_target(fd, name, rel)
            try:
                os.replace(local_path, name, dst_dir_fd=fd)
                return
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
            tmp = f".{name}.{os.urandom(8).hex()}.tmp"
            with open(local_path, "rb") as src:
                _write_temp(fd, tmp, src)
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            os.unlink(local_path)

    def remove(self, rel: str, recursive: bool = False) -> None:
        """Delete `rel`: a link is removed itself, never what it points to."""
        with self.parent(rel, doing="deleting") as (fd, name):
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                if not recursive:
                    raise IsADirectoryError(errno.EISDIR, f"{self.where(rel)} is a folder")
                import shutil

                shutil.rmtree(name, dir_fd=fd)  # never follows links (fd-based)
            else:
                os.unlink(name, dir_fd=fd)

    def entries(self, prefix: str = "") -> dict[str, Entry]:
        """Every leaf under `prefix`, relative to the root: regular files, and links, FIFOs
        and devices as leaves of their own kind (never followed, so the reader names them).
        Nothing is under a prefix that passes through a link."""
        prefix, out = prefix.strip("/"), dict[str, Entry]()
        try:
            info = self.lstat(prefix) if prefix else os.stat(self.root)
        except StoreFileRefused:  # below a link: nothing of the store is there
            return out
        if info is None:
            return out
        if not stat.S_ISDIR(info.st_mode):  # a file (or a link) named as the prefix
            return {prefix: Entry(kind(info.st_mode), info.st_size, info.st_mtime)}
        with contextlib.suppress(FileNotFoundError), self.folder(prefix) as fd:
            self._walk(fd, prefix, out)
        return out

    def _walk(self, fd: int, rel: str, out: dict[str, Entry]) -> None:
        """Every leaf below folder `fd`. A folder is told by the kind the directory listing
        itself gives (`d_type`, no status call: at 10,000 tasks a store has ~20,000
        folders); only leaves are asked for their size and time."""
        with os.scandir(fd) as it:
            found = list(it)
        head = f"{rel}/" if rel else ""
        for entry in found:
            try:
                if entry.is_dir(follow_symlinks=False):  # a link to a folder is a leaf
                    sub = os.open(entry.name, _DIR, dir_fd=fd)
                    try:
                        self._walk(sub, head + entry.name, out)
                    finally:
                        os.close(sub)
                    continue
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # removed since the folder was read: not there
                continue
            out[head + entry.name] = Entry(kind(info.st_mode), info.st_size, info.st_mtime)


def _write_temp(fd: int, tmp: str, data: bytes | IO[bytes]) -> None:
    """Create `tmp` in folder `fd` with `data` (bytes or a binary file), fsynced; a failed
    write (a full disk) leaves no temp behind."""
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                  0o666, dir_fd=fd)
    try:
        with os.fdopen(out, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                import shutil

                shutil.copyfileobj(data, f, 1 << 20)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise


def _fsync_dir(fd: int) -> None:
    """Make a folder's new entry durable (a commit is not done before this)."""
    os.fsync(fd)
