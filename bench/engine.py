"""Flow-engine overhead: per-task cost over plain Ray, S3 requests per commit, resume latency.

    .venv/bin/python bench/engine.py [--tasks 200] [--resume-tasks 1000]

Measures, on a local store and on moto's S3 server (127.0.0.1):
- a chain of N trivial tasks (each waits for the one before) and N parallel trivial tasks,
  through the engine (Ray executor) and as plain Ray tasks in the same Ray instance;
  overhead per task = (engine - plain) / N;
- S3 requests per commit (counted by wrapping the driver's s3fs `_call_s3`);
- resume latency of a run with M committed tasks (Ray already started; replay only).
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import tempfile
import time
import uuid

from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from alignflow.flows.engine import flow, gather, task
from alignflow.flows.journal import runs

N = 200


@task(max_retries=0)
def inc(x: int) -> int:
    return x + 1


@flow
def chain(cfg: dict) -> int:
    x = 0
    for _ in range(cfg["n"]):
        x = inc(x)
    return x


@flow
def fan(cfg: dict) -> int:
    return sum(gather(*[inc.submit(i) for i in range(cfg["n"])]))


def plain_ray(n: int) -> tuple[float, float]:
    """Seconds for an n-chain and n parallel plain Ray tasks."""
    import ray

    @ray.remote
    def f(x: int) -> int:
        return x + 1

    ray.get(f.remote(0))
    t0 = time.perf_counter()
    x = 0
    for _ in range(n):
        x = ray.get(f.remote(x))
    t1 = time.perf_counter()
    ray.get([f.remote(i) for i in range(n)])
    return t1 - t0, time.perf_counter() - t1


def count_s3(store: Store) -> collections.Counter:
    """Count the driver's S3 calls by method name (put_object, get_object, ...)."""
    counts: collections.Counter = collections.Counter()
    original = store.fs._call_s3

    async def counting(method, *args, **kwargs):
        counts[getattr(method, "__name__", str(method))] += 1
        return await original(method, *args, **kwargs)

    store.fs._call_s3 = counting
    return counts


def engine_times(store: Store, n: int) -> dict:
    out = {}
    for name, fl in (("chain", chain), ("parallel", fan)):
        counts = count_s3(store) if store.protocol == "s3" else None
        t0 = time.perf_counter()
        api.run(fl, {"n": n}, store=store, run_id=f"{name}-{uuid.uuid4().hex[:6]}")
        out[name] = time.perf_counter() - t0
        if counts is not None:
            out[f"{name}_s3_requests"] = dict(counts)
            out[f"{name}_puts_per_commit"] = counts["put_object"] / n
    return out


def resume_latency(store: Store, m: int) -> float:
    """Seconds to resume (replay) a run with `m` committed tasks, Ray already up."""
    run_id = f"resume-{uuid.uuid4().hex[:6]}"
    api.run(chain, {"n": m}, store=store, run_id=run_id, executor="inline")
    runs.update_run(store, run_id, status=runs.RUNNING)  # as if the driver died at the end
    t0 = time.perf_counter()
    assert api.resume(run_id, store=store, executor="ray") == m
    return time.perf_counter() - t0


def s3_store() -> tuple[Store, object]:
    from moto.server import ThreadedMotoServer

    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1"})
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    store = Store.open("s3://bench/store", storage_options={"endpoint_url": endpoint})
    store.fs.mkdir("bench")
    return store, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=N)
    parser.add_argument("--resume-tasks", type=int, default=1000)
    args = parser.parse_args()
    from alignflow.flows.ray.connect import ensure_ray

    t0 = time.perf_counter()
    ensure_ray(None)
    result = {"ray_start_s": time.perf_counter() - t0, "tasks": args.tasks}
    api.run(chain, {"n": 2}, store=tempfile.mkdtemp(), run_id="warmup")
    plain_chain, plain_par = plain_ray(args.tasks)
    result["plain_ray"] = {"chain": plain_chain, "parallel": plain_par}
    local = Store.open(tempfile.mkdtemp(prefix="af-bench-"))
    s3, server = s3_store()
    for label, store in (("local", local), ("s3", s3)):
        times = engine_times(store, args.tasks)
        times["chain_overhead_ms_per_task"] = 1e3 * (times["chain"] - plain_chain) / args.tasks
        times["parallel_overhead_ms_per_task"] = 1e3 * (times["parallel"] - plain_par) / args.tasks
        times["resume_s"] = resume_latency(store, args.resume_tasks)
        result[label] = times
    server.stop()
    print(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
