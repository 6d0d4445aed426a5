"""Benchmark: catalog SQL vs raw DuckDB `read_parquet` on the same committed files.

    .venv/bin/python bench/sql.py --rows 1000000 10000000          # local store
    .venv/bin/python bench/sql.py --rows 1000000 --s3               # + moto S3 server
    .venv/bin/python bench/sql.py --tasks 100 10000 --rows 0        # first answer, whole process

`--tasks`: the first answer of `alignflow sql QUERY` as a user runs it, against a bare DuckDB
process (`python -c`, `import duckdb`, `read_parquet` of the same files by glob, rows
printed), on a store of 1.2M rollout rows in N task files; CPU seconds of the whole process
(user + system, from wait4) and wall time, best of 5, interleaved. `alignflow sql` is
measured twice: through the `alignflow` command, and through the catalog's own entry
(`catalog/cli.py` alone, without what `alignflow/cli.py` imports before dispatching). The
first run after a store changes builds the catalog's local index (`catalog/index.py`); it is
reported on its own ("index cold").

Synthetic rollouts (scalar columns + a short response string) are committed through the
artifacts API, one file per iteration. Cold: a fresh process opens the
catalog (or a bare DuckDB connection over the same files) and runs each query once; its peak
RSS is its own. Warm: one process runs both, interleaved round by round, best of 10 (wall
and process CPU time), so the load other processes put on this shared machine hits both
alike.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

QUERIES = {
    "avg_reward_per_iteration": "SELECT iteration, avg(reward) AS r FROM {src} GROUP BY 1 "
                                "ORDER BY 1",
    "top10_reward": "SELECT run_id, iteration, prompt_id, sample_idx, reward FROM {src} "
                    "ORDER BY reward DESC LIMIT 10",
    "like_filter": "SELECT count(*) AS n FROM {src} WHERE response LIKE '%step 7 answer 4%'",
}
ROWS_PER_FILE = 1_000_000


def _batch(rng: np.random.Generator, it: int, n: int) -> pa.Table:
    """`n` synthetic rollout rows of iteration `it` (vectorised, no Python loop per row)."""
    pool = pa.array([f"step {k % 10} answer {k} because reasons" for k in range(1000)])
    idx = pa.array(rng.integers(0, 1000, n, dtype=np.int32))
    return pa.table({
        "iteration": pa.array(np.full(n, it, dtype=np.int32)),
        "task_key": pa.array([f"iter-{it:04d}/generate"] * 1).take(pa.array(np.zeros(n, np.int32))),
        "prompt_id": pa.array(np.char.add("p", (np.arange(n) // 8).astype(str))),
        "sample_idx": pa.array((np.arange(n) % 8).astype(np.int32)),
        "response": pool.take(idx),
        "reward": pa.array(rng.normal(it * 0.1, 1.0, n).astype(np.float32)),
        "kl": pa.array(rng.random(n, dtype=np.float32) * 0.05),
        "response_len": pa.array(rng.integers(5, 200, n, dtype=np.int32)),
    })


def generate(url: str, rows: int, storage_options: dict | None = None) -> float:
    """Commit `rows` rollout rows into a fresh store at `url`; returns seconds taken."""
    from alignflow.artifacts.commit import commit
    from alignflow.artifacts.parquet_io import write_table
    from alignflow.artifacts.store import Store

    store = Store.open(url, storage_options=storage_options)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    store.write_json("runs/bench/run.json", {"run_id": "bench", "flow": "bench", "seed": 0})
    for it in range((rows + ROWS_PER_FILE - 1) // ROWS_PER_FILE):
        n = min(ROWS_PER_FILE, rows - it * ROWS_PER_FILE)
        ref = write_table(store, "rollouts", _batch(rng, it, n), run_id="bench",
                          task="generate", partition={"iter": it})
        commit(store, "bench", f"iter-{it:04d}/generate", {"artifacts": [ref]})
    return time.perf_counter() - t0


FIRST_QUERIES = {"count": "SELECT count(*) AS n FROM {src}",
                 "group_by": "SELECT iteration, avg(reward) AS r FROM {src} GROUP BY 1 ORDER BY 1"}
TASK_ROWS = 1_200_000
_BARE = "import duckdb, sys; print(duckdb.connect().sql(sys.argv[1]).fetchall())"
_ENTRY = ("import argparse, sys; from alignflow.catalog import cli; p = argparse.ArgumentParser(); "
          "cli.configure('sql', p); a = p.parse_args(sys.argv[1:]); a.from_shell = True; "
          "sys.exit(cli.run('sql', a))")


def generate_tasks(url: str, tasks: int, rows: int = TASK_ROWS) -> float:
    """A store of `rows` rollout rows in `tasks` committed tasks (one file each), in
    max(1, tasks // 100) runs; returns seconds taken."""
    from alignflow.artifacts.commit import commit
    from alignflow.artifacts.parquet_io import write_table
    from alignflow.artifacts.store import Store

    store, rng, t0 = Store.open(url), np.random.default_rng(0), time.perf_counter()
    runs = max(1, tasks // 100)
    for r in range(runs):
        rid = f"bench{r:04d}"
        store.write_json(f"runs/{rid}/run.json", {"run_id": rid, "flow": "bench", "seed": 0})
        for it in range(tasks // runs):
            ref = write_table(store, "rollouts", _batch(rng, it, rows // tasks), run_id=rid,
                              task="generate", partition={"iter": it})
            commit(store, rid, f"iter-{it:04d}/generate", {"artifacts": [ref]})
    return time.perf_counter() - t0


def _env() -> dict[str, str]:
    """The children's environment as an installed package has it: bytecode cached (pip
    compiles on install; PYTHONDONTWRITEBYTECODE, set on this machine, made every run
    compile ~40 of our modules again, 0.12 CPU s), here under a bench folder of its own."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", "/tmp/alignflow-bench-pycache")
    return env


def _process(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user + system) of one whole process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=_env())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:3]} failed: {proc.stderr.read().decode()[-500:]}")
    proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime


def first_answer(url: str, rounds: int = 5) -> None:
    """Print the whole-process cost of the first answer, alignflow sql ÷ bare DuckDB."""
    cache = os.environ.setdefault("ALIGNFLOW_CATALOG_CACHE", os.path.join(url, "..", "index"))
    import shutil

    shutil.rmtree(cache, ignore_errors=True)
    alignflow = os.path.join(os.path.dirname(sys.executable), "alignflow")
    glob = f"read_parquet('{url}/runs/*/rollouts/*/*.parquet')"
    print(f"\n## first answer, {url} (load {os.getloadavg()[0]:.1f})")
    print(f"{'query':10} {'side':16} {'wall s':>7} {'cpu s':>7} {'wall x':>7} {'cpu x':>7}")
    for name, query in FIRST_QUERIES.items():
        sides = {"bare duckdb": [sys.executable, "-c", _BARE, query.format(src=glob)],
                 "alignflow sql": [alignflow, "sql", query.format(src="rollouts"), "--store", url],
                 "catalog entry": [sys.executable, "-c", _ENTRY, query.format(src="rollouts"),
                                   "--store", url]}
        shutil.rmtree(cache, ignore_errors=True)
        cold = _process(sides["catalog entry"])  # builds the index
        best = {side: (float("inf"), float("inf")) for side in sides}
        for _ in range(rounds):
            for side, cmd in sides.items():
                wall, cpu = _process(cmd)
                best[side] = (min(best[side][0], wall), min(best[side][1], cpu))
        bare = best["bare duckdb"]
        print(f"(load {os.getloadavg()[0]:.1f} after {rounds} rounds)")
        for side, (wall, cpu) in [*best.items(), ("index cold", cold)]:
            print(f"{name:10} {side:16} {wall:7.3f} {cpu:7.3f} {wall / bare[0]:7.2f} "
                  f"{cpu / bare[1]:7.2f}")


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _runner(store, mode: str):
    """(seconds to open, run(query) -> pa.Table, FROM source) for the catalog or raw DuckDB."""
    import duckdb

    from alignflow.catalog.catalog import Catalog
    from alignflow.catalog.connection import duckdb_path
    from alignflow.catalog.manifests import scan

    if mode == "catalog":
        open_s, cat = _timed(lambda: Catalog(store))
        return open_s, cat.sql, "rollouts"
    con = duckdb.connect(":memory:")
    if not store.is_local:
        con.register_filesystem(store.fs)
    files = [duckdb_path(store, rel) for rel in scan(store).files["rollouts"]]
    src = "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "])"
    return 0.0, lambda q: con.sql(q).to_arrow_table(), src


def measure(url: str, mode: str, storage_options: dict | None) -> dict:
    """Child process. `raw`/`catalog`: open, cold run of each query, peak RSS. `pair`: warm
    times of both, interleaved round by round (best of 7), so load from other processes on
    this shared machine hits both alike."""
    from alignflow.artifacts.store import Store

    store = Store.open(url, storage_options=storage_options)
    if mode == "pair":
        runners = {m: _runner(store, m) for m in ("raw", "catalog")}
        result: dict = {m: {} for m in runners}
        for name, query in QUERIES.items():
            times: dict[str, list[tuple[float, float]]] = {m: [] for m in runners}
            for round_ in range(11):
                order = list(runners) if round_ % 2 else list(reversed(runners))
                for m in order:
                    _, run, src = runners[m]
                    cpu = time.process_time()
                    wall = _timed(lambda q=query.format(src=src), run=run: run(q))[0]
                    times[m].append((wall, time.process_time() - cpu))
            for m in runners:  # round 0 warms up
                result[m][name] = {"wall": min(w for w, _ in times[m][1:]),
                                   "cpu": min(c for _, c in times[m][1:])}
        return result
    open_s, run, src = _runner(store, mode)
    result = {"open_s": open_s}
    for name, query in QUERIES.items():
        cold, table = _timed(lambda q=query.format(src=src): run(q))
        result[name] = {"cold_s": cold, "rows": table.num_rows}
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def _child(url: str, mode: str, storage_options: dict | None) -> dict:
    cmd = [sys.executable, __file__, "--measure", mode, "--url", url,
           "--options", json.dumps(storage_options or {})]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ)
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(label: str, url: str, storage_options: dict | None = None) -> None:
    """Print catalog vs raw timings for one store (raw first, so both see a warm page cache)."""
    raw = _child(url, "raw", storage_options)
    cat = _child(url, "catalog", storage_options)
    warm = _child(url, "pair", storage_options)
    print(f"\n## {label}  (catalog open: {cat['open_s']:.3f} s; peak RSS catalog "
          f"{cat['peak_rss_mb']:.0f} MB, raw {raw['peak_rss_mb']:.0f} MB)")
    print(f"{'query':26} {'raw cold':>9} {'cat cold':>9} {'raw warm':>9} {'cat warm':>9} "
          f"{'warm x':>7} {'raw cpu':>8} {'cat cpu':>8} {'cpu x':>6}")
    for name in QUERIES:
        r, c = raw[name], cat[name]
        assert r["rows"] == c["rows"], (name, r, c)
        rw, cw = warm["raw"][name], warm["catalog"][name]
        print(f"{name:26} {r['cold_s']:9.3f} {c['cold_s']:9.3f} {rw['wall']:9.3f} "
              f"{cw['wall']:9.3f} {cw['wall'] / rw['wall']:7.2f} {rw['cpu']:8.3f} "
              f"{cw['cpu']:8.3f} {cw['cpu'] / rw['cpu']:6.2f}")


def _s3(rows: int) -> None:
    from moto.server import ThreadedMotoServer

    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(k, "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {"endpoint_url": f"http://{host}:{port}"}
        import s3fs

        s3fs.S3FileSystem(skip_instance_cache=True, **options).mkdir("bench")
        url = f"s3://bench/rows-{rows}"
        print(f"generated {rows:,} rows on S3 in {generate(url, rows, options):.1f} s")
        compare(f"S3 (moto), {rows:,} rows", url, options)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--dir", default="/tmp/alignflow-bench-sql")
    parser.add_argument("--s3", action="store_true", help="also run over a moto S3 server")
    parser.add_argument("--tasks", type=int, nargs="*", default=[],
                        help="first answer at these numbers of committed tasks (1.2M rows)")
    parser.add_argument("--measure", choices=["catalog", "raw", "pair"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.url, args.measure, json.loads(args.options) or None)))
        return
    for tasks in args.tasks:
        url = os.path.join(args.dir, f"tasks-{tasks}")
        if not os.path.exists(url):
            print(f"generated {tasks:,} tasks locally in {generate_tasks(url, tasks):.1f} s")
        first_answer(url)
    for rows in (r for r in args.rows if r):
        url = os.path.join(args.dir, f"rows-{rows}")
        if not os.path.exists(url):
            print(f"generated {rows:,} rows locally in {generate(url, rows):.1f} s")
        compare(f"local, {rows:,} rows", url)
    if args.s3:
        _s3(min(args.rows))


if __name__ == "__main__":
    main()
