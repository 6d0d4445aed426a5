"""Fault sweep of the engine's command line: bad stores, dead drivers, failing tasks, bad
environments. Each case sets a store up, runs one `alignflow` command in a child process and
is judged:

- clear: it failed (or warned) with one `error:`/`warning:` line naming the thing, no traceback
- unclear: it failed, but not with one line that names the thing
- silent: it exited 0 although something was wrong, or said nothing about it
- leak: a secret from the environment showed up in the output or in the store
- breach: a tampered store made the command run its code, connect outside 127.0.0.1 or
  write outside the store (the hostile-store cases, `sweep_hostile.py`)

    .venv/bin/python bench/fault_sweep.py [--only NAME]

Prints one line per case and the counts (the table in the issue note). Needs no network;
the disk-full case needs root (a tmpfs), and is skipped otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from sweep_cases import CASES, SECRET, Context  # noqa: E402
from sweep_hostile import HOSTILE_CASES  # noqa: E402


@dataclass
class Outcome:
    name: str
    verdict: str
    detail: str = ""
    lines: list[str] = field(default_factory=list)


def _run(ctx: Context, argv: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, ALIGNFLOW_STORE=str(ctx.store), SWEEP_API_KEY=SECRET,
               ALIGNFLOW_RETRY_BASE="0.01", ALIGNFLOW_STORE_RETRY_SECONDS="5", **ctx.env)
    return subprocess.run([sys.executable, "-m", "alignflow.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def _leaked(ctx: Context, proc: subprocess.CompletedProcess) -> bool:
    if SECRET in proc.stdout or SECRET in proc.stderr:
        return True
    for path in ctx.store.rglob("*") if ctx.store.exists() else []:
        if path.is_file() and SECRET.encode() in path.read_bytes():
            return True
    return False


def judge(case, ctx: Context, proc: subprocess.CompletedProcess) -> Outcome:
    said = [line for line in proc.stderr.splitlines() + proc.stdout.splitlines()
            if line.startswith(("error: ", "warning: "))]
    out = Outcome(case.name, "", f"rc={proc.returncode}", said)
    broken = case.breach(ctx) if case.breach is not None else []
    if broken:
        out.verdict, out.detail = "breach", "; ".join(broken)
    elif _leaked(ctx, proc):
        out.verdict = "leak"
    elif case.forbid and re.search(case.forbid, proc.stdout + proc.stderr):
        out.verdict, out.detail = "unclear", f"printed {case.forbid!r}"
    elif case.expect in ("fail", "report") and proc.returncode == 0:
        out.verdict = "silent"
    elif case.expect == "ok" and proc.returncode != 0:
        out.verdict = "unclear"
    elif not re.search(case.pattern, proc.stdout + proc.stderr, re.M):
        out.verdict = "silent" if proc.returncode == 0 else "unclear"
    elif case.expect == "fail" and (len([s for s in said if s.startswith("error")]) != 1
                                    or "Traceback" in proc.stderr):
        out.verdict = "unclear"
    else:
        out.verdict = "clear"
    if case.after is not None and out.verdict == "clear" and not case.after(ctx):
        out.verdict, out.detail = "unclear", "left the store in a bad state"
    return out


def sweep(only: str | None) -> list[Outcome]:
    results = []
    for case in [*CASES, *HOSTILE_CASES]:
        if only and only not in case.name:
            continue
        tmp = Path(tempfile.mkdtemp(prefix="af-sweep-"))
        ctx = Context(tmp)
        try:
            if case.setup(ctx) is False:
                results.append(Outcome(case.name, "skipped", "cannot set up here"))
                continue
            results.append(judge(case, ctx, _run(ctx, case.argv(ctx))))
        finally:
            ctx.cleanup()
            shutil.rmtree(tmp, ignore_errors=True)
        r = results[-1]
        print(f"{r.verdict:8s} {r.name:44s} {r.detail:8s} {(r.lines or [''])[0][:110]}",
              flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases whose name contains this")
    results = sweep(parser.parse_args().only)
    counts = Counter(r.verdict for r in results)
    kinds = ("clear", "unclear", "silent", "leak", "breach", "skipped")
    print("\n| " + " | ".join(kinds) + " |\n|" + "---|" * len(kinds))
    print("| " + " | ".join(str(counts[k]) for k in kinds) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
