"""`alignflow sql` and `alignflow report`.

    alignflow sql "SELECT iteration, avg(reward) FROM rollouts GROUP BY 1" --format csv
    alignflow sql                      # interactive shell (or statements piped on stdin)
    alignflow report RUN_ID --out report.html
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
        parser.add_argument("--out", default=None,
                            help="write the result to this file (never inside the store)")
    elif name == "report":
        parser.add_argument("run_id", help="the run to report on")
        parser.add_argument("--out", default=None,
                            help="the HTML file to write (default report-RUN_ID.html)")
        parser.add_argument("--tensorboard", metavar="LOGDIR", default=None,
                            help="also write the run's metrics as TensorBoard event files")
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    limits = parser.add_argument_group("query limits")
    limits.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="stop a query after this many seconds (default 60)")
    limits.add_argument("--memory-limit", default="50%", metavar="SIZE",
                        help="DuckDB memory limit: a size (4GB) or a share of RAM (default 50%%)")
    limits.add_argument("--threads", type=int, default=None,
                        help="DuckDB threads (default: the usable cores, at most 8)")


def run(name: str, args: argparse.Namespace) -> int:
    """Run `sql` or `report`; errors of ours propagate to alignflow.cli as one line."""
    from alignflow.catalog.catalog import Catalog

    limits = _limits(args)
    if name == "sql" and args.format == "parquet" and not args.out:
        from alignflow.errors import ConfigError

        raise ConfigError("--format parquet needs --out FILE (Parquet is binary)")
    with Catalog(args.store, limits=limits) as catalog:
        if name == "report":
            return _report(catalog, args)
        return _sql(catalog, args)


def _limits(args: argparse.Namespace):
    from alignflow.catalog.limits import SqlLimits

    extra = {} if args.threads is None else {"threads": args.threads}
    return SqlLimits(timeout_s=args.timeout, memory=args.memory_limit, **extra)


def _warn(catalog, run_id: str | None = None) -> None:
    """Name every file the catalog left out (of `run_id` only, when given), once, on stderr
    (the results stay on stdout)."""
    for problem in catalog.problems:
        if run_id is None or problem.run_id == run_id:
            print(f"warning: {problem.message}", file=sys.stderr)


def _sql(catalog, args: argparse.Namespace) -> int:
    from alignflow.catalog.output import check_out_path, write_result
    from alignflow.catalog.shell import Shell
    from alignflow.errors import ConfigError

    if args.query is None:
        if args.out:
            raise ConfigError("--out needs a QUERY (the shell prints its results)")
        return Shell(catalog).loop()  # warns about left-out files itself
    if args.out:
        check_out_path(args.out, catalog.store, args.force)  # before the query runs
    query = sys.stdin.read() if args.query == "-" else args.query
    try:
        result = catalog.sql(query)
    finally:
        _warn(catalog)
    write_result(result, args.format, args.out, store=catalog.store, force=args.force)
    return 0


def _report(catalog, args: argparse.Namespace) -> int:
    from alignflow.catalog.output import check_out_path, check_outside_store, write_file
    from alignflow.catalog.report import render_report

    out = check_out_path(args.out or f"report-{args.run_id}.html", catalog.store, args.force)
    page = render_report(catalog, args.run_id).encode("utf-8")
    _warn(catalog, args.run_id)
    write_file(out, lambda f: f.write(page), args.force)
    print(f"wrote {out}")
    if args.tensorboard:
        from alignflow.catalog.tensorboard import export_tensorboard

        check_outside_store(args.tensorboard, catalog.store, "--tensorboard")
        points = export_tensorboard(catalog, args.run_id, args.tensorboard)
        print(f"wrote {points} TensorBoard points to {args.tensorboard}/{args.run_id}")
    return 0
