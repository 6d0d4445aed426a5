"""The walk of a resume's store through the engine's rooms (issue 27).

`alignflow run ... --load_checkpoint` on a run in the store goes through
`flows/cli/outputs.py:start_or_resume`. This follows the store object from there until the
flow's body starts: every call of an alignflow function that is handed the store (as an
argument, or as an attribute of the object it is called on) names the module it is in,
consecutive calls in one module are one visit, and a visit to a module already left is a
return. Few returns means the run's life goes one way through the rooms.

    python -m bench.store_walk            # the walk and its count, on a tiny inline run
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from alignflow.flows.control import runner

ROOT = "alignflow.flows."  # the engine and its commands; the store's own layer is not a room


def _holds(frame: Any) -> bool:
    from alignflow.artifacts.store import Store

    for value in frame.f_locals.values():
        if isinstance(value, Store) or isinstance(getattr(value, "store", None), Store):
            return True
    return False


def walk(call: Any) -> list[str]:
    """The rooms (modules under `alignflow.`, short names) a store visits while `call()`
    runs, from `start_or_resume` until the flow's body starts."""
    from alignflow.flows.cli import outputs

    rooms: list[str] = []
    state = {"on": False, "done": False}

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event != "call" or state["done"]:
            return
        if frame.f_code is outputs.start_or_resume.__code__:
            state["on"] = True
        if frame.f_code is runner._run_body.__code__:
            state["done"] = True
        module = frame.f_globals.get("__name__", "")
        if state["on"] and not state["done"] and module.startswith(ROOT) and _holds(frame):
            room = module.rsplit(".", 1)[-1]
            if not rooms or rooms[-1] != room:
                rooms.append(room)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return rooms


def returns(rooms: list[str]) -> int:
    """Visits to a room already left."""
    return sum(1 for i, room in enumerate(rooms) if room in rooms[:i])


def _command(folder: Path) -> list[str]:
    """A 2-iteration GRPO on the tiny model, continued by `ckpt.load_enable` when it is in
    the store (OpenRLHF's --load_checkpoint)."""
    from alignflow.tasks.zoo.tiny import build_tiny_model

    model = build_tiny_model(Path.home() / ".cache/alignflow/models/tiny-llama")
    sets = [f"actor.model_name_or_path={model}", "data.max_samples=16",
            "rollout.batch_size=4", "rollout.n_samples_per_prompt=2",
            "rollout.max_new_tokens=4", "train.batch_size=8", "train.micro_batch_size=4",
            "train.max_iterations=2", "reward.sources=rule:target:e", "ckpt.load_enable=true"]
    return ["run", "grpo", "--store", str(folder / "store"), "--run-id", "w",
            "--executor", "inline", *[x for s in sets for x in ("--set", s)]]


def _resume_walk(folder: Path) -> list[str]:
    from alignflow.cli import main as cli
    from alignflow.flows.control import api
    from alignflow.flows.journal import runs

    argv = _command(folder)
    assert cli(argv) == 0
    store = api.open_store(str(folder / "store"))
    runs.update_run(store, "w", status=runs.RESUMABLE)
    store.delete(runs.manifest_path("w", "export"))
    return walk(lambda: cli(argv))


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        rooms = _resume_walk(Path(tmp))
    print(" -> ".join(rooms))
    print(f"rooms visited: {len(rooms)}; returns to a room already left: {returns(rooms)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
