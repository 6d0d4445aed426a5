"""`alignflow models prepare NAME` and `alignflow models list`."""

from __future__ import annotations

import argparse
import time

from alignflow.tasks.zoo.cache import folder_bytes
from alignflow.tasks.zoo.registry import known_models, prepare_model


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    prep = sub.add_parser("prepare", help="build a named offline model's folder (once)")
    prep.add_argument("model", choices=sorted(known_models()), help="short model name")
    sub.add_parser("list", help="list named models: path, prepared?, size")


def _size(num_bytes: int) -> str:
    return f"{num_bytes / 2**20:.1f} MiB"


def _list() -> int:
    rows = [("NAME", "PREPARED", "SIZE", "PATH")]
    for name, spec in known_models().items():
        try:
            folder = spec.folder()
        except Exception as exc:  # a missing optional package: say so, keep listing
            rows.append((name, "no", "-", f"({exc})"))
            continue
        ready = spec.is_prepared(folder)
        rows.append((name, "yes" if ready else "no",
                     _size(folder_bytes(folder)) if ready else "-", str(folder)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)), row[3])
    return 0


def run(name: str, args: argparse.Namespace) -> int:
    if args.models_command == "list":
        return _list()
    start = time.perf_counter()
    folder = prepare_model(args.model)
    print(f"{args.model}: {folder} ({_size(folder_bytes(folder))}, "
          f"{time.perf_counter() - start:.1f}s)")
    return 0
