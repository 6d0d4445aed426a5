"""Property tests (hypothesis, stateful) of the commit protocol on memory and local stores:
under any sequence of commits, repeated commits, commits cut short (a temp file written,
never linked) and racing commits, each key is committed at most once, the first commit's
bytes are what every reader sees, and readers see nothing else."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from alignflow.artifacts import localfs
from alignflow.artifacts.commit import commit, load_manifest
from alignflow.artifacts.store import Store
from alignflow.errors import CommitConflict
from alignflow.flows.journal import runs

KEYS = st.sampled_from(["a", "b", "iter-0000/generate", "iter-0000/learn", "iter-0001/learn"])
OUTPUTS = st.one_of(st.integers(-5, 5), st.text(max_size=5), st.none())


class CommitProtocol(RuleBasedStateMachine):
    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        if self.backend == "local":
            self.folder = tempfile.mkdtemp(prefix="af-commit-")
            self.store = Store.open(f"{self.folder}/store")
        else:
            self.folder = None
            self.store = Store.open(f"memory://af-{uuid.uuid4().hex}")
        self.model: dict[str, object] = {}

    def teardown(self) -> None:
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
        elif self.store.fs.exists(self.store.root):
            self.store.fs.rm(self.store.root, recursive=True)

    def _commit(self, key: str, output: object) -> bool:
        try:
            commit(self.store, "r", key, {"output": output})
        except CommitConflict:
            return False
        return True

    @rule(key=KEYS, output=OUTPUTS)
    def commit_once(self, key, output):
        won = self._commit(key, output)
        assert won == (key not in self.model)
        self.model.setdefault(key, output)

    @rule(key=KEYS)
    def commit_cut_short(self, key):
        """The driver died after writing the commit's temp file, before linking it."""
        if self.store.is_local:
            rel = runs.manifest_path("r", key)
            with self.store.local.parent(rel, create=True) as (fd, name):
                localfs._write_temp(fd, f".{name}.{os.urandom(8).hex()}.tmp", b'{"half": ')

    @rule(key=KEYS, a=OUTPUTS, b=OUTPUTS)
    def two_drivers_race(self, key, a, b):
        results: dict[str, object] = {}

        def drive(name: str, value: object) -> None:
            try:
                results[name] = self._commit(key, value)
            except Exception as exc:  # surfaced by the assertion below
                results[name] = exc

        threads = [threading.Thread(target=drive, args=nv) for nv in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(isinstance(r, bool) for r in results.values()), results
        wins = sum(results.values())
        assert wins == (0 if key in self.model else 1)
        if key not in self.model:
            self.model[key] = a if results["a"] else b

    @invariant()
    def readers_see_exactly_the_first_commits(self):
        seen = runs.read_manifests(self.store, "r")
        assert {k: m["output"] for k, m in seen.items()} == self.model
        for key, output in self.model.items():
            assert load_manifest(self.store, "r", key)["output"] == output


class LocalCommitProtocol(CommitProtocol):
    backend = "local"


SETTINGS = settings(max_examples=25, stateful_step_count=12, deadline=None)
TestCommitOnMemory = CommitProtocol.TestCase
TestCommitOnMemory.settings = SETTINGS
TestCommitOnLocal = LocalCommitProtocol.TestCase
TestCommitOnLocal.settings = SETTINGS
