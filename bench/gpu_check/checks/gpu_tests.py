"""tests/gpu on the tiny model: the repository's own GPU tests, as pytest runs them.

SmolLM2 cannot travel, so the tests read their model from ALIGNFLOW_GPU_TEST_MODEL (the
runner sets tiny-llama). pytest runs with `--import-mode=append` and `python -P`, so the
checkout's root stays behind the installed bundle on sys.path (the checkout's `alignflow/`
folder lacks the mapped subpackages); a junit file gives each test's outcome.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from bench.gpu_check.checks.common import CheckFailed, cuda, out_dir, run, tiny_model_dir


def outcomes(junit: str) -> dict[str, str]:
    """test name -> passed / failed / skipped (with the message's first line)."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        status = "passed"
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                message = (node.get("message") or "").splitlines()[:1]
                status = f"{'skipped' if kind == 'skipped' else 'failed'}: " + "".join(message)
                break
        found[case.get("name")] = status[:300]
    return found


def startup_figures(stdout: str, wall: float) -> dict:
    """pytest's own session time and the rest of the run's wall time (interpreter start,
    plugins, conftest imports: 40 of 80 s on the H100 node, not yet explained)."""
    found = re.findall(r" in ([0-9.]+)s", stdout)
    session = float(found[-1]) if found else None
    return {"wall_s": round(wall, 2), "pytest_session_s": session,
            "outside_session_s": round(wall - session, 2) if session is not None else None}


def check(argv: list[str]) -> dict:
    cuda()
    tiny_model_dir()  # built once here, not inside a test's time
    junit = str(out_dir() / "gpu-tests.xml")
    env = {**os.environ, "ALIGNFLOW_GPU_TEST_MODEL": os.environ.get(
        "ALIGNFLOW_GPU_TEST_MODEL", "tiny-llama")}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--import-mode=append", f"--junitxml={junit}", "tests/gpu"],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    print(done.stdout[-4000:], done.stderr[-2000:])
    tests = outcomes(junit) if os.path.exists(junit) else {}
    passed = sum(v == "passed" for v in tests.values())
    failed = [k for k, v in tests.items() if v.startswith("failed")]
    figures = {"tests": tests, "passed": passed, "failed": len(failed),
               "skipped": sum(v.startswith("skipped") for v in tests.values()),
               "model": env["ALIGNFLOW_GPU_TEST_MODEL"], "pytest_exit": done.returncode,
               **startup_figures(done.stdout, wall)}
    figures["summary"] = f"{passed} passed, {len(failed)} failed, {figures['skipped']} skipped"
    if done.returncode != 0 or not passed:
        tail = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
        raise CheckFailed(f"pytest tests/gpu exited {done.returncode}: {tail}", figures)
    return figures


if __name__ == "__main__":
    run(check)
