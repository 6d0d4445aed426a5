"""The hostile-store cases of bench/fault_sweep.py (issue 20 §8): a store with a tampered run
per route (`tests/hostile_routes.py`), `resume RUN` for each, and `resume --all` and `tick`
over all of them. A case whose command ran the store's code, connected outside 127.0.0.1 or
wrote outside the store is judged `breach`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from sweep_cases import Case, Context

from tests.hostile_routes import ROUTES, breaches, hook_env, tamper

ROOT = Path(__file__).resolve().parents[1]
_STATE: dict[str, dict] = {}  # the tampered store of the case now running


def _setup(status: str):
    def setup(ctx: Context) -> None:
        _STATE["ctx"] = tamper(ctx.tmp)
        env = hook_env(ctx.tmp)
        ctx.env.update(env, PYTHONPATH=os.pathsep.join([env["PYTHONPATH"], str(ROOT)]),
                       ALIGNFLOW_TRUST_FILE=str(ctx.tmp / "none.toml"))
        for path in (ctx.store / "runs").glob("*/run.json"):
            meta = json.loads(path.read_text())
            meta.update(status=status, wake_at=time.time() - 1)
            path.write_text(json.dumps(meta))
    return setup


def breach(_ctx: Context) -> list[str]:
    return breaches(_STATE["ctx"])


def _bad_file(make):
    """Runs a and b of `steps`; one hostile file put into run a."""
    def setup(ctx: Context) -> None:
        ctx.run("a")
        ctx.run("b")
        make(ctx.store / "runs" / "a")
    return setup


def _zero(run: Path) -> None:
    (run / "run.json").unlink()
    (run / "run.json").symlink_to("/dev/zero")


ROUTE_NAMES = [*ROUTES, "foreign-record", "flow-module", "flow-file"]
HOSTILE_CASES = [
    *[Case(f"hostile: resume {name}", "a hostile store", _setup("FAILED"),
           lambda c, n=name: ["resume", n], r"^error: (run '|runs/)", breach=breach)
      for name in ROUTE_NAMES],
    Case("hostile: resume --all", "a hostile store", _setup("RESUMABLE"),
         lambda c: ["resume", "--all"], r"(^[\w-]+: error: .*\n?){11}", "report", breach=breach),
    Case("hostile: tick", "a hostile store", _setup("SLEEPING"), lambda c: ["tick"],
         r"(^[\w-]+: error: .*\n?){11}", "report", breach=breach),
    Case("hostile: ls, run.json -> /dev/zero", "a hostile store", _bad_file(_zero),
         lambda c: ["ls"], r"warning: .*runs/a/run\.json is a symbolic link(.|\n)*|b .*"
         r"SUCCESSFUL", "ok"),
    Case("hostile: status, a FIFO manifest", "a hostile store",
         _bad_file(lambda run: os.mkfifo(run / "tasks" / "step-9.json")),
         lambda c: ["status", "a"], r"step-9\.json is a FIFO", "ok"),
    Case("hostile: ls, run.json nested deep", "a hostile store",
         _bad_file(lambda run: (run / "run.json").write_bytes(b"[" * 100_000)),
         lambda c: ["ls"], r"nests JSON more than 128 levels deep", "ok"),
]
