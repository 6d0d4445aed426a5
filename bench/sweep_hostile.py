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


ROUTE_NAMES = [*ROUTES, "foreign-record", "flow-module", "flow-file"]
HOSTILE_CASES = [
    *[Case(f"hostile: resume {name}", "a hostile store", _setup("FAILED"),
           lambda c, n=name: ["resume", n], r"^error: (run '|runs/)", breach=breach)
      for name in ROUTE_NAMES],
    Case("hostile: resume --all", "a hostile store", _setup("RESUMABLE"),
         lambda c: ["resume", "--all"], r"(^[\w-]+: error: .*\n?){11}", "report", breach=breach),
    Case("hostile: tick", "a hostile store", _setup("SLEEPING"), lambda c: ["tick"],
         r"(^[\w-]+: error: .*\n?){11}", "report", breach=breach),
]
