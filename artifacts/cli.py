"""`alignflow gc`: list orphaned files in the store; `--delete` removes them."""

from __future__ import annotations

import argparse

from alignflow.artifacts.gc import delete_orphans, find_orphans
from alignflow.artifacts.store import Store


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=None,
                        help="store URL (default: $ALIGNFLOW_STORE or ./alignflow-store)")
    parser.add_argument("--run", default=None, help="only this run id")
    parser.add_argument("--delete", action="store_true",
                        help="remove the orphans (default: only list them)")
    parser.add_argument("--min-age", type=float, default=0.0, metavar="SECONDS",
                        help="skip files younger than this (a live run may be writing them)")


def run(name: str, args: argparse.Namespace) -> int:
    store = Store.open(args.store)
    orphans = find_orphans(store, args.run, args.min_age)
    for o in orphans:
        print(f"{o.bytes:>12}  {o.path}")
    total = sum(o.bytes for o in orphans)
    if args.delete:
        delete_orphans(store, orphans)
        print(f"deleted {len(orphans)} orphan(s), {total} bytes, from {store.url}")
    else:
        print(f"{len(orphans)} orphan(s), {total} bytes, in {store.url}"
              + (" (dry run; --delete removes them)" if orphans else ""))
    return 0
