"""`alignflow sql` and `alignflow report`.

    alignflow sql "SELECT iteration, avg(reward) FROM rollouts GROUP BY 1" --format csv
    alignflow sql                      # interactive shell (or statements piped on stdin)
    alignflow report RUN_ID --out report.html

`sql` bounds its whole process: the query's time, DuckDB's memory and threads, the result's
rows and bytes (written out batch by batch), and the process's own memory
(`limits.cap_process_memory`). Ctrl-C, SIGTERM and SIGHUP interrupt the query and close the
catalog, so its spill folder goes with it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

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
    from alignflow.catalog.catalog import Catalog

    limits = _limits(args)
    if name == "sql" and args.format == "parquet" and not args.out:
        from alignflow.errors import ConfigError

        raise ConfigError("--format parquet needs --out FILE (Parquet is binary)")
    opened: list = []
    with _signals_interrupt(opened), Catalog(args.store, limits=limits) as catalog:
        opened.append(catalog)
        if name == "report":
            return _report(catalog, args)
        from alignflow.catalog.limits import cap_process_memory

        with cap_process_memory(limits):
            return _sql(catalog, args)


@contextlib.contextmanager
def _signals_interrupt(catalogs: list) -> Iterator[None]:
    """SIGTERM and SIGHUP end the command like Ctrl-C: the query is interrupted, the
    catalog closed and its spill folder removed, instead of the process dying on the spot.
    DuckDB looks at Python's signals only between its tasks (one step of a big sort can
    take many seconds), so a thread woken by any signal (`signal.set_wakeup_fd`) interrupts
    the queries of `catalogs` at once as well."""
    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    try:
        old = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    except ValueError:  # not the main thread: signals are not ours to take
        yield
        return
    wake, woken = os.pipe()
    os.set_blocking(woken, False)
    old_fd = signal.set_wakeup_fd(woken, warn_on_full_buffer=False)
    threading.Thread(target=_interrupt_on_wake, args=(wake, catalogs), daemon=True,
                     name="alignflow-sql-signals").start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(old_fd)
        for s, handler in old.items():
            signal.signal(s, handler)
        os.close(woken)  # the thread reads the end of the pipe and stops


def _interrupt_on_wake(wake: int, catalogs: list) -> None:
    try:
        while os.read(wake, 1):
            for catalog in catalogs:
                catalog.interrupt()
    finally:
        os.close(wake)


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


def _sql(catalog, args: argparse.Namespace) -> int:
    from alignflow.catalog.output import check_out_path, write_rows
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
        with catalog.stream(query) as rows:  # written out batch by batch
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
