"""Starting a checked run, and the outputs OpenRLHF users look for: `ckpt.load_enable`
(run the same command again to continue: the run id comes from `ckpt.path`, and an
existing run is resumed) and `ckpt.output_dir` (the final HF folder copied out of the
store, as `--save_path` writes it)."""

from __future__ import annotations

import hashlib
import os
import re
from typing import TYPE_CHECKING

from alignflow.artifacts.store import Store
from alignflow.flows.config.lookup import value_at
from alignflow.flows.config.refs import references
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from alignflow.flows.seams import FlowOutput, ProgressSink

if TYPE_CHECKING:
    from alignflow.flows.cli.request import RunRequest
    from alignflow.flows.cli.run_config import CheckedRun


def run_id_for(flow: str, checked: CheckedRun, given: str | None) -> str | None:
    """`--run-id`, else (with ckpt.load_enable) one derived from ckpt.path, else None."""
    ckpt = value_at(checked.config, "ckpt")
    if given or ckpt is None or not ckpt.load_enable:
        return given
    where = os.path.abspath(ckpt.path or ckpt.output_dir or ".")
    stem = re.sub(r"[^A-Za-z0-9_.=+-]+", "-", os.path.basename(where)).strip("-.") or "ckpt"
    return f"{flow}-{stem[:40]}-{hashlib.sha256(where.encode()).hexdigest()[:8]}"


def start_or_resume(known: RunRequest, checked: CheckedRun,
                    progress: ProgressSink | None) -> FlowOutput:
    """Resume the run when ckpt.load_enable finds it in the store, else start it."""
    run_id = run_id_for(os.path.basename(known.flow).split(":")[-1], checked, known.run_id)
    ckpt = value_at(checked.config, "ckpt")
    store = api.open_store(known.store)
    if ckpt is not None and ckpt.load_enable and run_id and _exists(store, run_id):
        output = _continue(store, run_id, known, checked, progress)
    else:
        output = api.run(known.flow, checked.config, run_id=run_id, store=store,
                         seed=checked.seed, address=known.address, executor=known.executor,
                         progress=progress, given=given_keys(checked.origins))
    if ckpt is not None and ckpt.output_dir and isinstance(output, dict) and output.get("model"):
        copy_out(store, output["model"], ckpt.output_dir)
        if output.get("critic"):  # --save_value_network: OpenRLHF's <save_path>_critic
            copy_out(store, output["critic"], ckpt.output_dir.rstrip("/") + "_critic")
    return output


def given_keys(origins: dict[str, str]) -> dict[str, str]:
    """The keys the user set (a flag, `--set`, the YAML file) and where, for the report to
    mark among every key; a default a flag's release moved is not the user's own."""
    return {k: o for k, o in origins.items() if o.startswith(("-", "config file"))}


def _continue(store: Store, run_id: str, known: RunRequest, checked: CheckedRun,
              progress: ProgressSink | None) -> FlowOutput:
    """The run resumed; a finished one gives its output (OpenRLHF loads the last checkpoint,
    finds nothing left to train and ends). What this command names is the user's own."""
    named = [r.value for r in references(checked.config)]
    flow = known.flow if ".py:" in known.flow else None
    return api.resume(run_id, store=store, executor=known.executor, address=known.address,
                      progress=progress, trust=named, flow=flow, config=checked.config,
                      finished_output=True)


def _exists(store: Store, run_id: str) -> bool:
    return store.exists(runs.run_json(run_id))


def copy_out(store: Store, rel: str, folder: str) -> None:
    """The store folder `rel` (an HF export) copied into the local `folder`."""
    os.makedirs(folder, exist_ok=True)
    for path in store.list(rel):
        store.get_file(path, os.path.join(folder, os.path.basename(path)))
