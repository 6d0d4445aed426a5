"""Small flows for the engine tests. Tasks count their executions by appending a line to
`<cfg["dir"]>/<name>.count`; behaviour is switched by files the tests create or remove."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from alignflow.artifacts.journal import journal_record
from alignflow.errors import EngineError
from alignflow.flows.engine import flow, gather, sleep, task, wait_for
from alignflow.flows.ray.workers import worker_group


def bump(folder: str, name: str) -> int:
    """Count one execution of `name`; returns how many there were so far."""
    path = Path(folder) / f"{name}.count"
    with open(path, "a") as f:
        f.write("x\n")
    return len(path.read_text().splitlines())


def count(folder: str, name: str) -> int:
    path = Path(folder) / f"{name}.count"
    return len(path.read_text().splitlines()) if path.exists() else 0


@journal_record
@dataclass(frozen=True)
class StepOut:
    step: int
    value: float


@task
def step(folder: str, i: int) -> StepOut:
    bump(folder, f"step-{i}")
    if os.path.exists(Path(folder) / f"fail-{i}"):
        raise ValueError(f"planned failure at step {i}")
    return StepOut(i, i * 1.5)


@flow
def steps(cfg: dict) -> list:
    """`cfg["n"]` sequential steps; `fail-<i>` in the folder makes step i raise."""
    return [step(cfg["dir"], i) for i in range(cfg["n"])]


@task(cache=True)
def expensive(folder: str, x: int) -> int:
    bump(folder, "expensive")
    return x * 10


@flow
def cached(cfg: dict) -> int:
    return expensive(cfg["dir"], cfg["x"])


@task
def mark(folder: str, name: str) -> str:
    bump(folder, name)
    return name


@flow
def sleepy(cfg: dict) -> list:
    a = mark(cfg["dir"], "before")
    sleep(cfg["seconds"])
    return [a, mark(cfg["dir"], "after")]


@flow
def waiting(cfg: dict) -> dict:
    mark(cfg["dir"], "before")
    payload = wait_for("approve", timeout=cfg.get("timeout"))
    mark(cfg["dir"], "after")
    return {"payload": payload}


@task
def cancel_self(folder: str) -> None:
    from alignflow.artifacts.scope import current_scope
    from alignflow.flows.control import api

    scope = current_scope()
    api.cancel(scope.run_id, store=scope.store)
    bump(folder, "cancel_self")


@flow
def self_canceling(cfg: dict) -> str:
    cancel_self(cfg["dir"])
    return mark(cfg["dir"], "after-cancel")


@task
def flaky(folder: str, fail_times: int, exc: str) -> int:
    n = bump(folder, "flaky")
    if n <= fail_times:
        raise {"timeout": TimeoutError, "value": ValueError,
               "engine": EngineError}[exc](f"attempt {n} failed")
    return n


@flow
def retrying(cfg: dict) -> object:
    opts = {"max_retries": cfg.get("max_retries", 3), "retry_exceptions": cfg.get("retry", False),
            "catch_exceptions": cfg.get("catch", False)}
    return flaky.options(**opts)(cfg["dir"], cfg["fail_times"], cfg["exc"])


@flow
def parallel(cfg: dict) -> list:
    futures = [mark.options(key=f"par/{i}").submit(cfg["dir"], f"par-{i}") for i in range(cfg["n"])]
    return gather(*futures)


class Counter:
    """A worker object: a running total, checkpointed to the store by `add`."""

    def __init__(self) -> None:
        self.total, self.restored_from = 0, None

    def restore(self, store, checkpoint: str) -> None:
        self.total = int(store.read_json(checkpoint)["total"])
        self.restored_from = checkpoint


@task(worker="counter")
def add(obj: Counter, folder: str, x: int) -> dict:
    from alignflow.artifacts.scope import current_scope

    bump(folder, "add")
    obj.total += x
    scope = current_scope()
    path = f"runs/{scope.run_id}/checkpoints/counter-{scope.task_key}.json"
    scope.store.write_json(path, {"total": obj.total})
    return {"total": obj.total, "restored_from": obj.restored_from, "checkpoint": path}


@flow
def counting(cfg: dict) -> list:
    worker_group("counter", Counter, num_cpus=0)
    return [add(cfg["dir"], x) for x in cfg["xs"]]


@task
def pid_then_sleep(folder: str) -> int:
    """Writes its pid; the first attempt sleeps so a test can kill the worker process."""
    first = not (Path(folder) / "pid").exists()
    (Path(folder) / "pid").write_text(str(os.getpid()))
    bump(folder, "pid_then_sleep")
    if first:
        time.sleep(60)
    return os.getpid()


@flow
def killable_worker(cfg: dict) -> int:
    return pid_then_sleep.options(max_retries=2)(cfg["dir"])


@task
def train_step(prev: str | None, i: int, pause: float) -> dict:
    """Deterministic torch math: one SGD step of a linear model on seeded random data,
    committing a metrics Parquet file and a safetensors checkpoint."""
    import pyarrow as pa
    import torch
    from safetensors.torch import load, save

    from alignflow.artifacts.scope import current_scope

    torch.set_num_threads(1)
    scope = current_scope()
    w = load(scope.store.read_bytes(prev))["w"] if prev else torch.zeros(8, 1)
    x = torch.randn(64, 8)
    y = x @ torch.arange(8.0).unsqueeze(1) + 0.1 * torch.randn(64, 1)
    w = w.clone().requires_grad_(True)
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    w = (w - 0.05 * w.grad).detach()
    time.sleep(pause)
    scope.write("metrics", pa.table({"step": [i], "key": ["loss"], "value": [loss.item()],
                                     "ts": [float(i)]}), partition={"iter": i})
    path = f"runs/{scope.run_id}/checkpoints/w-{i:04d}.safetensors"
    scope.store.write_bytes(path, save({"w": w}))
    return {"loss": loss.item(), "checkpoint": path, "w_sum": float(w.sum())}


@flow
def training(cfg: dict) -> dict:
    prev, out = None, {}
    for i in range(cfg["iters"]):
        out = train_step.options(key=f"iter-{i:04d}/train")(prev, i, cfg.get("pause", 0.0))
        prev = out["checkpoint"]
    return out


@dataclass(frozen=True, kw_only=True)
class TinyConfig:
    n: int = 2
    dir: str = "/tmp"


@flow
def typed(cfg: TinyConfig) -> list:
    return [step(cfg.dir, i) for i in range(cfg.n)]


@task
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@flow
def training_pair(cfg: dict) -> list:
    futures = [nap.options(key=f"pair/{k}").submit(cfg["seconds"]) for k in ("a", "b")]
    return gather(*futures)


@task(worker="counter", max_retries=2)
def add_or_hang(obj: Counter, folder: str, x: int) -> dict:
    """Like `add`, but the first attempt writes its (actor) pid and hangs to be killed."""
    first = not (Path(folder) / "pid").exists()
    (Path(folder) / "pid").write_text(str(os.getpid()))
    if first:
        time.sleep(60)
    return {"total": obj.total + x, "restored_from": obj.restored_from}


@flow
def counting_then_hang(cfg: dict) -> dict:
    worker_group("counter", Counter, num_cpus=0)
    add(cfg["dir"], 1)
    add(cfg["dir"], 2)
    return add_or_hang(cfg["dir"], 10)


@task(max_retries=0)
def exits(code: object) -> int:
    """Calls sys.exit inside the task body."""
    import sys

    sys.exit(code)


@flow
def exiting(cfg: dict) -> int:
    return exits(cfg["code"])


@task
def leaky(var: str) -> None:
    """Prints and raises the value of environment variable `var` (a secret)."""
    print(f"token in use: {os.environ[var]}")
    raise ValueError(f"login refused for token {os.environ[var]}")


@flow
def leaking(cfg: dict) -> None:
    leaky(cfg["var"])


@task(max_retries=1)
def hard_exit(code: int) -> int:
    """Ends its worker process without Python's clean-up (as a segfault or OOM kill would)."""
    os._exit(code)


@flow
def hard_exiting(cfg: dict) -> int:
    return hard_exit(cfg["code"])


@task(worker="counter", max_retries=1)
def actor_exit(obj: Counter, code: int, hard: bool) -> int:
    """sys.exit (hard=False) or os._exit (hard=True) inside a worker-group actor."""
    import sys

    if hard:
        os._exit(code)
    sys.exit(code)


@flow
def actor_exiting(cfg: dict) -> int:
    worker_group("counter", Counter, num_cpus=0)
    return actor_exit(cfg["code"], cfg["hard"])


@task
def blob(i: int, rows: int) -> dict:
    """Commits `rows` incompressible metric rows (about 8 bytes each on disk)."""
    import numpy as np
    import pyarrow as pa

    from alignflow.artifacts.scope import current_scope

    values = np.random.default_rng(i).random(rows)
    scope = current_scope()
    scope.write("metrics", pa.table({"step": [i] * rows, "key": ["blob"] * rows,
                                     "value": values, "ts": [0.0] * rows}),
                partition={"iter": i})
    return {"rows": rows}


@flow
def blobs(cfg: dict) -> list:
    return [blob.options(key=f"iter-{i:04d}/blob")(i, cfg["rows"]) for i in range(cfg["iters"])]


class _FakeTrainer:
    """What `export_model` asks of a host's trainer: an HF folder with a config.json."""

    global_step = 0

    def save_pretrained(self, folder: str, tokenizer: object = None) -> None:
        Path(folder, "config.json").write_text('{"model_type": "written by the export"}')


@task
def export(folder: str) -> dict:
    """`export_model` of a fake host: writes `runs/<run>/final/actor/config.json`."""
    from types import SimpleNamespace

    from alignflow.tasks.steps.export import export_model

    bump(folder, "export")
    return export_model(SimpleNamespace(trainer=_FakeTrainer(), tokenizer=None))


@flow
def exporting(cfg: dict) -> dict:
    """`steps`, then an export of the final model into the run's `final/` folder."""
    for i in range(cfg["n"]):
        step(cfg["dir"], i)
    return export(cfg["dir"])


class Unbuildable:
    """A worker object whose models fail to load (a missing engine package, say)."""

    def preload(self) -> None:
        raise ModuleNotFoundError("No module named 'vllm'")


@flow
def unbuildable(cfg: dict) -> dict:
    worker_group("counter", Unbuildable, num_cpus=0)
    return add(cfg["dir"], 1)
