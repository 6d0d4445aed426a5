"""`alignflow sql` and `alignflow report`.

    alignflow sql "SELECT iteration, avg(reward) FROM rollouts GROUP BY 1" --format csv
    alignflow sql                      # interactive shell
    alignflow report RUN_ID --out report/
"""

from __future__ import annotations

import argparse
import sys

from alignflow.catalog.output import FORMATS

_STORE_HELP = "store URL (default $ALIGNFLOW_STORE, else ./alignflow-store)"


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    """Add the flags of `sql` or `report` to `parser`."""
    parser.add_argument("--store", default=None, help=_STORE_HELP)
    if name == "sql":
        parser.add_argument("query", nargs="?", default=None,
                            help="SQL to run ('-' reads it from stdin); none opens a shell")
        parser.add_argument("--format", choices=FORMATS, default="table",
                            help="output format (parquet needs --out)")
        parser.add_argument("--out", default=None, help="write the result to this file")
    elif name == "report":
        parser.add_argument("run_id", help="the run to report on")
        parser.add_argument("--out", default=None,
                            help="folder for report.md and its plots (default report-RUN_ID)")
        parser.add_argument("--tensorboard", metavar="LOGDIR", default=None,
                            help="also write the run's metrics as TensorBoard event files")


def run(name: str, args: argparse.Namespace) -> int:
    """Run `sql` or `report`; errors of ours propagate to alignflow.cli as one line."""
    from alignflow.catalog.catalog import Catalog

    if name == "sql" and args.format == "parquet" and not args.out:
        from alignflow.errors import ConfigError

        raise ConfigError("--format parquet needs --out FILE (Parquet is binary)")
    with Catalog(args.store) as catalog:
        if name == "report":
            return _report(catalog, args)
        return _sql(catalog, args)


def _sql(catalog, args: argparse.Namespace) -> int:
    from alignflow.catalog.output import write_result
    from alignflow.catalog.shell import Shell

    if args.query is None:
        return Shell(catalog).loop()
    query = sys.stdin.read() if args.query == "-" else args.query
    write_result(catalog.sql(query), args.format, args.out)
    return 0


def _report(catalog, args: argparse.Namespace) -> int:
    from alignflow.catalog.report import write_report

    path = write_report(catalog, args.run_id, args.out or f"report-{args.run_id}")
    print(f"wrote {path}")
    if args.tensorboard:
        from alignflow.catalog.tensorboard import export_tensorboard

        points = export_tensorboard(catalog, args.run_id, args.tensorboard)
        print(f"wrote {points} TensorBoard points to {args.tensorboard}/{args.run_id}")
    return 0
