"""The driver: replays committed tasks, runs the rest, retries faults, commits manifests.

One `Driver` runs one attempt of one run in this process. Task calls arrive through `submit`
in the flow's (deterministic) order; each gets a key, and the journal decides: a committed
key returns its recorded output; any other runs live with the current code. Only the driver
writes manifests, so a task is committed iff its manifest exists.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from alignflow.artifacts import usercode
from alignflow.artifacts.redact import redact
from alignflow.errors import FlowError, TaskFailed
from alignflow.flows.control.live import LiveFuture, backoff, manifest_record
from alignflow.flows.control.planning import Plan
from alignflow.flows.control.recovery import Budget
from alignflow.flows.control.redo import redo_lost
from alignflow.flows.control.worker_groups import WorkerGroups
from alignflow.flows.engine import Done, Task, TaskError, scope_prefix
from alignflow.flows.journal import codec, runs
from alignflow.flows.journal.commit_queue import CommitQueue
from alignflow.flows.journal.identity import cache_key, task_seed
from alignflow.flows.journal.lease import Lease
from alignflow.flows.journal.timers import Timers
from alignflow.flows.ray.executors import fault_record, is_transient
from alignflow.flows.seams import ProgressSink
from alignflow.timeline import mark


class Stopped(BaseException):
    """The run was canceled, or another driver took the lease: stop at a task boundary."""


class Driver(Timers, WorkerGroups):
    """Runs one flow attempt against the journal of `run_id`."""

    check_interval = 1.0

    def __init__(self, state: runs.RunState, executor: Any, *, block: bool = True,
                 progress: ProgressSink | None = None, lease: Lease | None = None) -> None:
        """`state`: the run as its life read it (`flows/journal/runs.py:RunState`)."""
        self.store, self.run_id, self.executor = state.store, state.run_id, executor
        self.seed = state.meta["seed"]
        self.block = block
        self.progress: ProgressSink | None = progress
        self.lease: Lease | None = lease
        self.manifests = dict(state.manifests)
        self.seq = 1 + max((m.get("seq", 0) for m in self.manifests.values()), default=0)
        self.first_seq = self.seq
        self.counters: Counter[str] = Counter()
        self.used, self.restored = set[str](), set[str]()
        self.pending, self.code_changed = list[LiveFuture](), list[str]()
        self.groups: dict[str, tuple[Any, dict]] = {}
        self.queue = CommitQueue()  # finished, not yet committed (checkpoints on their way)
        self.announced: set[str] = set()  # worker groups named on the progress line
        self.latest_ckpt: dict[str, str] = {}  # worker group -> its newest checkpoint
        self.replayed = self.ran = 0
        self.outcome: str | None = None  # the run's status when this attempt ended
        self.listeners: list[Any] = []  # called with each manifest this driver commits
        self.plan: Plan | None = None  # set by the runner: the plan, recoveries by role
        self.budget: Budget | None = None
        self.workers_of: dict[str, str | None] = {}  # live task key -> its worker group
        self.incarnations: Counter[str | None] = Counter()  # worker group -> processes replaced
        self._last_check = 0.0

    # -- keys and boundaries ---------------------------------------------------------------
    def next_key(self, base: str, explicit: str | None) -> str:
        """The call's key: `explicit`, else `base-N` counted per base; inside
        `alignflow.scope(name)` both get the prefix `name/` (`engine.scope`)."""
        prefix = scope_prefix()
        if explicit is None:
            base = prefix + base
            explicit = f"{base}-{self.counters[base]}"
            self.counters[base] += 1
        else:
            explicit = prefix + explicit
        if explicit in self.used:
            raise FlowError(f"task key {explicit!r} is used twice in run {self.run_id!r}; give "
                            "each call its own key (e.g. task.options(key=f'iter-{i:04d}/name'))")
        self.used.add(explicit)
        return explicit

    def add_worker_group(self, name: str, factory: Any, options: dict) -> None:
        """Inside `alignflow.scope(s)` the group is the scope's own (`s/policy`): a
        subflow's workers, checkpoints and restores stay apart from another's."""
        super().add_worker_group(scope_prefix() + name, factory, options)

    def boundary(self, force: bool = False) -> None:
        """Stop if the run was canceled or the lease was lost (checked at most once a second)."""
        if self.lease is not None and self.lease.lost:
            raise Stopped(f"run {self.run_id!r}: another driver took the lease or asked this one "
                          "to stop (resume --force)")
        if not force and time.time() - self._last_check < self.check_interval:
            return
        self._last_check = time.time()
        if runs.read_run(self.store, self.run_id).get("status") == runs.CANCELED:
            raise Stopped(f"run {self.run_id!r} was canceled")

    # -- submit: replay, cache or run ------------------------------------------------------
    def submit(self, task: Task, args: tuple, kwargs: dict) -> Any:
        self.boundary()
        self.queue.flush(self._write_live, block=False, redo=self._redo)
        key = self.next_key(task.name, task.opts.key)
        if task.opts.worker and scope_prefix():  # the scope's own group (`add_worker_group`)
            task = task.options(worker=scope_prefix() + task.opts.worker)
        if key in self.manifests:
            return Done(self.replay(task, self.manifests[key]))
        input_hash = self._input_hash(task, args, kwargs)
        if task.opts.cache and input_hash is not None:  # None: not cacheable (raised above)
            hit = self._cache_hit(task, key, input_hash)
            if hit is not None:
                return Done(hit)
        if task.opts.worker:
            self._prepare_worker(task.opts.worker, key)
        fut = LiveFuture(self, task, key, args, kwargs, input_hash)
        self.pending.append(fut)
        return fut

    def replay(self, task: Task | None, manifest: dict) -> Any:
        self.replayed += 1
        if self.progress is not None:
            self.progress.task_finished(manifest["task_key"], 0.0, cached=True)
        if task is not None and manifest.get("code_hash") != task.code_hash:
            self.code_changed.append(manifest["task_key"])
        if manifest.get("worker") and manifest.get("checkpoint"):
            self.latest_ckpt[manifest["worker"]] = manifest["checkpoint"]
        return codec.decode(manifest.get("output"), runs.manifest_path(self.run_id,
                                                                       manifest["task_key"]))

    def _input_hash(self, task: Task, args: tuple, kwargs: dict) -> str | None:
        try:
            return codec.digest({"args": list(args), "kwargs": kwargs})
        except FlowError:
            if task.opts.cache:
                raise
            return None

    def _cache_hit(self, task: Task, key: str, input_hash: str) -> Any:
        rel = f"cache/{cache_key(task.name, task.opts.version, task.code_hash, input_hash)}.json"
        if not self.store.exists(rel):
            return None
        index = self.store.read_json(rel)
        if not self.store.exists(index["manifest"]):
            return None  # the source run was deleted
        src = self.store.read_json(index["manifest"])
        fields = {k: src.get(k) for k in ("output", "artifacts", "checkpoint", "status")}
        self.commit(task, key, input_hash, dict(fields, cached_from=index["manifest"],
                                                attempts=0, started=time.time(),
                                                ended=time.time()))
        return codec.decode(src.get("output"), index["manifest"])

    # -- live tasks --------------------------------------------------------------------------
    def launch(self, fut: LiveFuture) -> Any:
        call = {"store": self.store, "run_id": self.run_id, "task_key": fut.key,
                "seed": task_seed(self.seed, fut.key), "attempt": fut.attempt,
                "fn": fut.task.fn, "args": fut.args, "kwargs": fut.kwargs,
                "worker": fut.task.opts.worker, "code": usercode.current()}
        if self.progress is not None and fut.attempt == 1:
            self.progress.task_started(fut.key)
        fut.queued = time.time()
        self.workers_of[fut.key] = fut.task.opts.worker
        fut.incarnation = self.incarnations[fut.task.opts.worker]
        return self.executor.submit(call, vars(fut.task.opts))

    def resolve(self, fut: LiveFuture) -> Any:
        """Wait for `fut`, retrying transient faults (and user errors if asked), then commit."""
        opts = fut.task.opts
        while True:
            try:
                res, err = fut.handle.wait(), None
            except Exception as exc:
                if not is_transient(exc):
                    raise
                res, err = None, fault_record(exc, fut.task.opts.worker)
            err = err or res["error"]
            if err is None:
                return self._commit_live(fut, res)
            if (err["kind"] == "system" or opts.retry_exceptions) and fut.attempt <= opts.max_retries:
                self._retry(fut, err, restart=res is None and bool(opts.worker))
                continue
            return self._fail(fut, res, err)

    def _charge(self, err: dict, worker: str | None, key: str) -> None:
        """A role replaced: counted against its budget (`flows/control/recovery.py`)."""
        if self.budget is not None:
            self.budget.charge_fault(err, worker, key)

    def _retry(self, fut: LiveFuture, err: dict, restart: bool) -> None:
        mark(f"fault {fut.key} {err['type']}")
        worker = fut.task.opts.worker
        replaced = restart and fut.incarnation != self.incarnations[worker]  # since (`redo.py`)
        restart = restart and not replaced
        if err["type"] == "EngineError" and not restart:
            self._charge(err, worker, fut.key)
        # a dead worker's replacement removes the cause: its first retry need not wait
        wait = 0.0 if replaced or (restart and fut.attempt == 1) else backoff(fut.attempt)
        if self.progress is not None:
            self.progress.log(f"{fut.key} attempt {fut.attempt} failed ({err['type']}: "
                              f"{redact(err['message'])}); retrying in {wait:.1f}s")
        time.sleep(wait)
        fut.attempt += 1
        if restart and worker is not None:
            self._restart_worker(worker, fut.incarnation,
                                 charge=lambda: self._charge(err, worker, fut.key))
        fut.handle = self.launch(fut)

    def _fail(self, fut: LiveFuture, res: dict | None, err: dict) -> Any:
        self.flush()  # earlier tasks that did finish stay committed
        now = time.time()
        started = (res or {}).get("started", now)
        tries = f" after {fut.attempt} attempts" if fut.attempt > 1 else ""
        message = redact(f"{err['type']}: {err['message']}{tries}")
        if not fut.task.opts.catch_exceptions:
            if self.progress is not None:
                self.progress.task_finished(fut.key, now - started, status="FAILED")
            raise TaskFailed(fut.key, message, kind=err["kind"], fault=err["type"])
        error = TaskError(fut.key, err["type"], redact(err["message"]), err["kind"])
        self.commit(fut.task, fut.key, fut.input_hash, {
            "status": "FAILED_CAUGHT", "output": codec.encode(error), "attempts": fut.attempt,
            "started": started, "ended": (res or {}).get("ended", now)})
        return error

    def _commit_live(self, fut: LiveFuture, res: dict) -> Any:
        """Commit now, or queue behind tasks whose checkpoint is still being written (and
        this one's own: `res["durable"]`); the flow gets the output either way."""
        self.ran += 1
        fields = {k: res[k] for k in ("output", "artifacts", "checkpoint", "started", "ended")}
        fields.update(status="SUCCESSFUL", attempts=fut.attempt, queued=fut.queued)
        handle = self.executor.durable(fut.task.opts.worker, res["durable"]) \
            if res.get("durable") else None
        if handle is None and not self.queue:
            self._write_live(fut, fields)
        else:
            self.queue.add(fut, fields, handle)
            self.queue.flush(self._write_live, block=False, redo=self._redo)
        return codec.decode(fields["output"], runs.manifest_path(self.run_id, fut.key))

    def _write_live(self, fut: LiveFuture, fields: dict) -> None:
        self._write_manifest(fut.task, fut.key, fut.input_hash, fields)
        if fut.task.opts.cache and fut.input_hash is not None:
            ck = cache_key(fut.task.name, fut.task.opts.version, fut.task.code_hash, fut.input_hash)
            self.store.write_json(f"cache/{ck}.json", {
                "manifest": runs.manifest_path(self.run_id, fut.key), "run_id": self.run_id,
                "task_key": fut.key})

    def flush(self) -> None:
        """Commit every finished task, waiting for their checkpoints (`commit_queue.py`)."""
        self.queue.flush(self._write_live, block=True, redo=self._redo)

    def _redo(self, failed: TaskFailed) -> bool:
        return redo_lost(self, failed)

    def commit(self, task: Task | None, key: str, input_hash: str | None, fields: dict) -> dict:
        """Write the manifest of `key` (create-once) after every queued one."""
        self.flush()
        return self._write_manifest(task, key, input_hash, fields)

    def _write_manifest(self, task: Task | None, key: str, input_hash: str | None,
                        fields: dict) -> dict:
        """Write the manifest of `key` (create-once) and note it in the in-memory journal."""
        if self.lease is not None and self.lease.lost:
            raise Stopped(f"run {self.run_id!r}: another driver took the lease or asked this one "
                          "to stop (resume --force)")
        manifest = manifest_record(self.run_id, task_seed(self.seed, key), self.seq, task, key,
                                   input_hash, fields)
        self.store.create_json(runs.manifest_path(self.run_id, key), manifest)
        self.seq += 1
        self.manifests[key] = manifest
        if manifest["worker"] and manifest["checkpoint"]:
            self.latest_ckpt[manifest["worker"]] = manifest["checkpoint"]
        if self.progress is not None:
            self.progress.task_finished(key, (manifest["ended"] or 0) - (manifest["started"] or 0),
                                        bool(fields.get("cached_from")), status=manifest["status"],
                                        output=manifest.get("output"))
        for listener in self.listeners:
            listener(manifest)
        return manifest

    def finish(self) -> None:
        """Resolve (commit) every task the flow submitted but never waited for."""
        for fut in self.pending:
            fut.result()
        self.flush()
