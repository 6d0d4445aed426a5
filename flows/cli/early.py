"""`alignflow run ... --executor ray` starts Ray before anything heavy is imported.

The command's own module pulls in the config classes (torch, transformers: seconds); Ray's
start (GCS, raylet, the warm worker that imports the flow) is on the critical path of a Ray
run, so it begins from the bare argv, on a background thread (`flows/ray/local.py`), while
the command imports and checks its config. Only a plain local Ray run qualifies: no
`--address`, simulated cluster, dry run, detach, supervise or help; anything this cheap pre-scan cannot
read leaves the start to the command (`flows/cli/commands.py`), as before.
"""

from __future__ import annotations

import argparse


def _prescan(argv: list[str]) -> argparse.Namespace | None:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("flow", nargs="?")
    parser.add_argument("--executor")
    for flag in ("--address", "--simulate-cluster", "--cluster", "--config"):
        parser.add_argument(flag)
    for flag in ("--dry-run", "--detach", "--supervise", "--help-config", "-h", "--help"):
        parser.add_argument(flag, action="store_true")
    try:
        known, _ = parser.parse_known_args(argv)
    except SystemExit:  # argparse's error path: the real parser will say what is wrong
        return None
    return known


def start_ray_if_asked(argv: list[str]) -> None:
    """Start in-process Ray now when `argv` (after `run`) asks for a local Ray run."""
    known = _prescan(argv)
    if known is None or known.executor != "ray" or not known.flow:
        return
    if known.address or known.simulate_cluster or known.dry_run or known.detach or \
            known.supervise:  # a supervisor runs no flow: its drivers start their own Ray
        return
    if known.help_config or known.help:
        return
    _sigterm_as_interrupt()
    start_ray_early(known.flow)


def _sigterm_as_interrupt() -> None:
    """A SIGTERM while Ray starts and the command imports its config ends the command like
    Ctrl-C, through its exit path (which ends the Ray node: `flows/ray/local.stop`), as it
    does once the command runs (`commands._sigterm_as_interrupt`); left to the default, the
    process died at once and the raylet's agents outlived it (issue 46)."""
    import signal
    import threading

    def interrupt(_signum: int, _frame: object) -> None:
        from alignflow.flows.ray import head

        head.cancel()  # a start that fails now is not tried again
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, interrupt)


def start_ray_early(ref: str) -> None:
    """Ray on a background thread, then the warm pool importing flow `ref`'s module."""
    from alignflow.flows.ray import local as ray_local
    from alignflow.flows.ray import pool as ray_pool
    from alignflow.flows.registry import BUILTIN

    target = BUILTIN.get(ref, (ref if ".py:" not in ref else "",))[0]
    module = target.partition(":")[0]
    warm = (module,) if module and module != "__main__" else ()
    ray_local.start_early(lambda: ray_pool.create(warm))
