"""`python -m bench.gpu_bundle {build,plan,verify-ray}`: see the package docstring."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.gpu_bundle import build, manifest, plan, verify_ray

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "dist" / "gpu-bundle-cache"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_bundle",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    made = sub.add_parser("build", help="fetch, slim and lay out the bundle")
    made.add_argument("out", type=Path, nargs="?", default=REPO / "dist" / "gpu-bundle")
    made.add_argument("--no-verify-ray", action="store_true",
                      help="skip starting the pruned Ray on this machine's Python")
    planned = sub.add_parser("plan", help="resolve the package list offline; write the "
                                          "manifest skeleton")
    planned.add_argument("out", type=Path)
    sub.add_parser("verify-ray", help="prune this Python's Ray wheel as the bundle's; start it")
    for each in (made, planned):
        each.add_argument("--cache", type=Path, default=CACHE)
    return parser


def _plan(out: Path, cache: Path) -> int:
    resolved = build.offline_plan(REPO, cache)
    path = manifest.write(manifest.document(resolved), out)
    for line in plan.describe(resolved):
        print(line)
    print(f"plan: {len(resolved.entries)} distributions; manifest skeleton in {path}")
    return 0


def _build(out: Path, cache: Path, verify: bool) -> int:
    doc = build.build(REPO, out, cache)
    total = doc["total_bytes"]
    print(f"bundle: {out} — {len(doc['files'])} files, {total:,} bytes "
          f"({total / 2**20:.1f} MiB; limit {doc['limit_bytes']:,})")
    if verify:
        figures = verify_ray.verify(cache)
        print(f"pruned Ray started on Python {figures['python']} with a task, an actor and a "
              f"placement group in {figures['seconds']} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "plan":
            return _plan(args.out, args.cache)
        if args.command == "build":
            return _build(args.out, args.cache, not args.no_verify_ray)
        figures = verify_ray.verify(CACHE)
        print(f"pruned Ray started: {figures}")
        return 0
    except (plan.PlanError, RuntimeError, FileNotFoundError) as exc:
        print(f"gpu-bundle: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
