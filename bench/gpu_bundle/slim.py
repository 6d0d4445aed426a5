"""Cutting a wheel down to what alignflow loads: unpack, drop folders, strip ELF files, xz.

Ray's wheel is 79 MB and unpacks to 201 MB, most of it Java jars, the dashboard's web
client and the libraries on top of Ray Core; its binaries carry symbol tables. A slimmed
part is a tar.xz of the files as they lie in site-packages, with the dist-info's RECORD
rewritten to the files that remain (and their new hashes), so `importlib.metadata` and
pip's view of the installed package stay true. Tar entries are sorted and their owners and
times fixed (the archive still differs by a few KB between builds: the manifest's sha256 is
what the installer checks, not a reproducible hash).
"""

from __future__ import annotations

import base64
import hashlib
import lzma
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

from bench.gpu_bundle.pins import Slim

ELF_MAGIC = b"\x7fELF"
FIXED_MTIME = 1_700_000_000  # any fixed time: reproducible archives


def unpack(wheel: Path, into: Path) -> Path:
    """The wheel's files under `into` (a fresh folder), with their Unix modes: zipfile
    drops them, and Ray's gcs_server and raylet must stay executable."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            path = Path(zf.extract(info, into))
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                os.chmod(path, mode)
    return into


def prune(root: Path, drop: tuple[str, ...]) -> int:
    """Removes the `drop` folders (paths relative to `root`); returns bytes removed. A folder
    missing from the wheel is an error: the pins moved and the slimming no longer applies."""
    freed = 0
    for rel in drop:
        path = root / rel
        if not path.is_dir():
            raise FileNotFoundError(f"slim: {rel} is not in the unpacked wheel at {root}; "
                                    "update pins.SLIM for this version")
        freed += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        shutil.rmtree(path)
    return freed


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == ELF_MAGIC


def strip_elf(root: Path) -> int:
    """`strip --strip-unneeded` on every ELF file (binaries and .so); returns bytes saved."""
    elves = [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
             and _is_elf(p)]
    before = sum(p.stat().st_size for p in elves)
    for path in elves:
        subprocess.run(["strip", "--strip-unneeded", str(path)], check=True,
                       capture_output=True)
    return before - sum(p.stat().st_size for p in elves)


def _record_hash(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def rewrite_record(root: Path) -> Path:
    """The dist-info RECORD listing exactly the files left, with their current hashes."""
    records = list(root.glob("*.dist-info/RECORD"))
    if len(records) != 1:
        raise FileNotFoundError(f"slim: expected one *.dist-info/RECORD under {root}, "
                                f"found {len(records)}")
    record = records[0]
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        entry = "" if path == record else f"{_record_hash(path)},{path.stat().st_size}"
        lines.append(f"{rel},{entry}" if entry else f"{rel},,")
    record.write_text("\n".join(lines) + "\n")
    return record


def _fixed(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = FIXED_MTIME
    return info


def tar_xz(root: Path, out: Path) -> Path:
    """`root`'s files as a tar.xz (xz -9e), sorted, owners and times fixed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    preset = 9 | lzma.PRESET_EXTREME
    with tarfile.open(out, "w:xz", preset=preset, format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(root).as_posix(), filter=_fixed)
    return out


def slim_wheel(wheel: Path, spec: Slim, work: Path, out: Path) -> dict[str, int]:
    """Unpack, prune, strip and xz one wheel into `out`; returns the byte counts."""
    root = unpack(wheel, work)
    unpacked = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    dropped = prune(root, spec.drop)
    stripped = strip_elf(root) if spec.strip else 0
    rewrite_record(root)
    tar_xz(root, out)
    shutil.rmtree(work, ignore_errors=True)
    return {"wheel": wheel.stat().st_size, "unpacked": unpacked, "dropped": dropped,
            "stripped": stripped, "xz": out.stat().st_size}
