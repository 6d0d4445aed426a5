"""Benchmark: alignflow's Parquet write/read vs raw pyarrow, locally and on moto S3.

    .venv/bin/python bench/store.py [--rows 1000000] [--s3-rows 200000]

Synthetic rollouts with 128 response tokens and 128 behaviour logprobs per row. Prints
rows/s of each path, alignflow's ratio over raw `pq.write_table` / `pq.read_table` of the
same table with the same options (zstd, same dictionary columns) and with pyarrow's
defaults, and the peak RSS growth of each phase (sampled by a thread).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from alignflow.artifacts import Store, read_table, schemas, write_table
from alignflow.artifacts.conform import conform

TOKENS = 128


def batch(start: int, n: int, seed: int) -> pa.RecordBatch:
    """n rollout rows, already in the ROLLOUTS schema."""
    rng = np.random.default_rng(seed)
    offsets = pa.array(np.arange(0, (n + 1) * TOKENS, TOKENS, dtype=np.int32))
    ids = pa.ListArray.from_arrays(offsets, pa.array(rng.integers(0, 49152, n * TOKENS,
                                                                  dtype=np.int32)))
    lps = pa.ListArray.from_arrays(offsets, pa.array(-rng.random(n * TOKENS, np.float32) * 5))
    idx = np.arange(start, start + n)
    table = pa.table({
        "run_id": ["bench"] * n, "iteration": pa.array(np.full(n, 1, np.int32)),
        "task_key": ["iter-1/generate"] * n, "prompt_id": pa.array((idx // 8).astype(str)),
        "sample_idx": pa.array((idx % 8).astype(np.int32)), "response_ids": ids,
        "behaviour_logprobs": lps, "reward": pa.array(rng.random(n, np.float32)),
        "response_len": pa.array(np.full(n, TOKENS, np.int32)),
        "finish_reason": pa.array(["length"] * n).dictionary_encode(),
    })
    return conform(table, schemas.ROLLOUTS).to_batches()[0]


def batches(rows: int, size: int = 65536) -> Iterator[pa.RecordBatch]:
    for start in range(0, rows, size):
        yield batch(start, min(size, rows - start), seed=start)


class PeakRss:
    """Peak RSS growth (MiB) over the enclosed block, sampled every 10 ms."""

    def __enter__(self) -> PeakRss:
        self.proc, self.base, self.peak, self._on = psutil.Process(), 0, 0, True
        self.base = self.peak = self.proc.memory_info().rss
        self._t = threading.Thread(target=self._sample, daemon=True)
        self._t.start()
        return self

    def _sample(self) -> None:
        while self._on:
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.01)

    def __exit__(self, *exc) -> None:
        self._on = False
        self._t.join()
        self.mib = (self.peak - self.base) / 2**20


def timed(label: str, rows: int, fn: Callable[[], object], results: dict, repeat: int = 2) -> None:
    """Best of `repeat` runs (the machine is shared, so the best is the least disturbed)."""
    secs = float("inf")
    with PeakRss() as rss:
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            secs = min(secs, time.perf_counter() - start)
    results[label] = rows / secs
    print(f"{label:<50} {secs:7.2f} s {rows / secs:>12,.0f} rows/s  peak RSS +{rss.mib:6.0f} MiB",
          flush=True)


def run_suite(where: str, store: Store, rows: int, raw_fs, raw_dir: str) -> dict:
    """Raw vs alignflow write and read of the same `rows`-row table on one backend."""
    data = [pa.Table.from_batches(list(batches(rows)))]
    dict_cols = schemas.ROLLOUTS.dictionary_columns
    raw_same, raw_default = f"{raw_dir}/raw-same.parquet", f"{raw_dir}/raw-default.parquet"
    res: dict[str, float] = {}
    timed(f"{where} raw write (defaults)", rows, lambda: pq.write_table(
        data[0], raw_default, filesystem=raw_fs), res)
    timed(f"{where} raw write (zstd, same dict)", rows, lambda: pq.write_table(
        data[0], raw_same, filesystem=raw_fs, compression="zstd", use_dictionary=dict_cols), res)
    refs = []
    timed(f"{where} alignflow write (table)", rows, lambda: refs.append(write_table(
        store, "rollouts", data[0], run_id="bench", task="gen", partition={"iter": 1})), res)
    data.clear()  # the streamed write below never holds the whole table
    timed(f"{where} alignflow write (streamed, incl. synthesis)", rows, lambda: write_table(
        store, "rollouts", batches(rows), run_id="bench", task="gen"), res, repeat=1)
    timed(f"{where} raw read", rows, lambda: pq.read_table(raw_same, filesystem=raw_fs), res)
    # the timed write above ran twice: read one of its files, `rows` rows, like the raw read
    timed(f"{where} alignflow read", rows, lambda: read_table(store, refs[:1]), res)
    w_same = res[f"{where} alignflow write (table)"] / res[f"{where} raw write (zstd, same dict)"]
    w_def = res[f"{where} alignflow write (table)"] / res[f"{where} raw write (defaults)"]
    r = res[f"{where} alignflow read"] / res[f"{where} raw read"]
    print(f"{where}: alignflow/raw write {w_same:.2f}x (same options), {w_def:.2f}x (pyarrow "
          f"defaults); read {r:.2f}x; file {refs[0].bytes / 2**20:.0f} MiB", flush=True)
    return res


def start_moto() -> tuple[subprocess.Popen, str]:
    """moto's S3 server in its own process, so its memory does not count as ours."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, endpoint
        time.sleep(0.1)
    raise RuntimeError("moto server did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--s3-rows", type=int, default=200_000)
    args = ap.parse_args()
    print(f"cpus={os.cpu_count()} rows={args.rows} s3_rows={args.s3_rows} tokens/row={TOKENS}")
    with tempfile.TemporaryDirectory() as tmp:
        local = Store.open(f"{tmp}/store")
        run_suite("local", local, args.rows, local.fs, tmp)
    if args.s3_rows:
        os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                          AWS_DEFAULT_REGION="us-east-1")
        proc, endpoint = start_moto()
        try:
            s3 = Store.open("s3://bench-bucket/store", storage_options={"endpoint_url": endpoint})
            s3.fs.mkdir("bench-bucket")
            run_suite("s3", s3, args.s3_rows, s3.fs, "bench-bucket/raw")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
