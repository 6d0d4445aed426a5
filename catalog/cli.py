"""`alignflow sql` and `alignflow report`.

    alignflow sql "SELECT iteration, avg(reward) FROM rollouts GROUP BY 1" --format csv
    alignflow sql                      # interactive shell (or statements piped on stdin)
    alignflow report RUN_ID --out report.html

`sql` bounds its whole process: the time of the catalog's opening and the query together,
DuckDB's memory and threads, the result's rows and bytes (written out batch by batch), and
the process's own memory from before the catalog opens (`limits.cap_process_memory`).
SIGTERM, SIGHUP and Ctrl-C end it, whatever it is doing, with `interrupted`, its spill folder
removed and the process ended by that signal (a shell sees 143 for SIGTERM); the time limit
ends it with one error line and status 2 (`process.py`).
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
        parser.add_argument("run_id", nargs="+", metavar="RUN_ID",
                            help="the run to report on; several: one page comparing them "
                                 "(curves on the same axes, config differences)")
        parser.add_argument("--out", default=None,
                            help="the HTML file to write (default report-RUN_ID.html, "
                                 "report-RUN1-vs-RUN2.html)")
        parser.add_argument("--tensorboard", metavar="LOGDIR", default=None,
                            help="also write the run's metrics as TensorBoard event files")
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    limits = parser.add_argument_group("query limits")
    limits.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="stop a query after this many seconds (default 60, at most a day)")
    limits.add_argument("--memory-limit", default="25%", metavar="SIZE",
                        help="memory limit: a size (4GB) or a share of RAM (default 25%%)")
    limits.add_argument("--threads", type=int, default=None,
                        help="DuckDB threads (default: the usable cores, at most 8)")
    limits.add_argument("--max-rows", type=int, default=None, metavar="N",
                        help="stop a query whose result has more rows (default 1,000,000)")
    limits.add_argument("--max-bytes", default=None, metavar="SIZE",
                        help="stop a query whose result is bigger, in Arrow bytes (default 1GiB)")


def run(name: str, args: argparse.Namespace) -> int:
    """Run `sql` or `report`; errors of ours propagate to alignflow.cli as one line."""
    from alignflow.catalog import process
    from alignflow.catalog.results import short

    limits = _limits(args)
    if name == "sql" and args.format == "parquet" and not args.out:
        from alignflow.errors import ConfigError

        raise ConfigError("--format parquet needs --out FILE (Parquet is binary)")
    query = (sys.stdin.read() if args.query == "-" else args.query) if name == "sql" else None
    one_query = query is not None
    late = (f"SQL stopped: `{short(query or '')}` ran past the {limits.timeout_s:g} s time "
            "limit, opening the catalog included (--timeout SECONDS)")
    with process.bounded(limits.timeout_s if one_query else None, late,
                         ctrl_c=one_query or name == "report",
                         hard=bool(getattr(args, "from_shell", False))) as until:
        return _open_and_run(name, args, limits, query, until)


def _open_and_run(name: str, args: argparse.Namespace, limits, query: str | None,
                  until: float) -> int:
    """Open the catalog and run the command; for `sql`, the process's memory is capped
    from before the catalog opens (its views over the store's files) to the end."""
    from alignflow.catalog.catalog import Catalog
    from alignflow.catalog.limits import cap_process_memory

    if name == "report":
        with Catalog(args.store, limits=limits) as catalog:
            return _report(catalog, args)
    with cap_process_memory(limits), Catalog(args.store, limits=limits,
                                             for_query=query) as catalog:
        return _sql(catalog, args, query, until)


def _limits(args: argparse.Namespace):
    from alignflow.catalog.limits import SqlLimits

    given = {"threads": args.threads, "max_rows": args.max_rows, "max_bytes": args.max_bytes}
    return SqlLimits(timeout_s=args.timeout, memory=args.memory_limit,
                     **{k: v for k, v in given.items() if v is not None})


def _warn(catalog, run_id: str | None = None) -> None:
    """Name every file the catalog left out (of `run_id` only, when given), once, on stderr
    (the results stay on stdout)."""
    for problem in catalog.problems:
        if run_id is None or problem.run_id == run_id:
            print(f"warning: {problem.message}", file=sys.stderr)


def _sql(catalog, args: argparse.Namespace, query: str | None, until: float) -> int:
    from alignflow.catalog.output import check_out_path, write_rows
    from alignflow.catalog.shell import Shell
    from alignflow.errors import ConfigError

    if query is None:
        if args.out:
            raise ConfigError("--out needs a QUERY (the shell prints its results)")
        return Shell(catalog).loop()  # warns about left-out files itself
    if args.out:
        check_out_path(args.out, catalog.store, args.force)  # before the query runs
    try:
        with catalog.stream(query, until=until,  # written out batch by batch, or rendered
                            materialize=args.format == "table") as rows:
            write_rows(rows.schema, rows, args.format, args.out, store=catalog.store,
                       force=args.force)
    finally:
        _warn(catalog)
    return 0


def _report(catalog, args: argparse.Namespace) -> int:
    from alignflow.catalog.output import check_out_path, check_outside_store, write_file
    from alignflow.catalog.report import render_report

    ids = list(args.run_id)
    if len(ids) > 1:
        from alignflow.catalog.report.compare import default_out, render_comparison

        out = check_out_path(args.out or default_out(ids), catalog.store, args.force)
        page = render_comparison(catalog, ids).encode("utf-8")
    else:
        out = check_out_path(args.out or f"report-{ids[0]}.html", catalog.store, args.force)
        page = render_report(catalog, ids[0]).encode("utf-8")
    for run_id in ids:
        _warn(catalog, run_id)
    write_file(out, lambda f: f.write(page), args.force)
    print(f"wrote {out}")
    if args.tensorboard:
        from alignflow.catalog.tensorboard import export_tensorboard

        check_outside_store(args.tensorboard, catalog.store, "--tensorboard")
        for run_id in ids:
            points = export_tensorboard(catalog, run_id, args.tensorboard)
            print(f"wrote {points} TensorBoard points to {args.tensorboard}/{run_id}")
    return 0
