"""Chaos benchmark (issue 26 §4): a GRPO and a DPO run on a simulated multi-node cluster
while a seeded injector kills, at a set rate, worker actors, generation engines, worker
nodes and the driver (`chaos_inject.py`), against the same run undisturbed.

    .venv/bin/python bench/chaos.py [--flows grpo,dpo] [--rates 10,5] [--seed 0]
                                    [--iterations 24] [--new-tokens 24] [--epochs 3]
                                    [--kinds node] [--bracket] [--ray-health-defaults]

A fault costs seconds whatever the run's length, and a rate R is about 100/R faults per
run: ETTR depends on how long the run is (bench/RESULTS.md measures 800 GRPO iterations).

Every run is `alignflow run FLOW … --address <cluster> --supervise` (the command a user
types, the cluster started here and left up while drivers come and go); its head gives up
on a lost node as `tasks/simulate/node_health.py` says (`--ray-health-defaults`: as Ray
does). A rate R means one fault per R% of the undisturbed run's wall time (seeded jitter
±50%), from the first committed training step on (`--from-start`: from the driver's
start), until the run ends; the times and kinds come from the seed alone, so the same seed
gives the same faults under either health setting (a kind with nothing to hit at its time
is skipped and counted, not redrawn).
Measured per run:
- finished: the supervisor exited 0 and the run is SUCCESSFUL, no person involved;
- ETTR: undisturbed wall time / disturbed wall time;
- rollouts lost / consumed twice (GRPO): SQL over the store's `rollouts` (committed rows
  only): every (iteration, prompt, sample) exactly once, each iteration from one task;
- weights: sha256 of the final export's safetensors against the undisturbed run's.
Each role may be recovered BUDGET times (the crash-loop stop is not what is measured); a
disturbed run still going after LIMIT × the undisturbed time is stopped (not finished).
Prints one JSON line per run and a Markdown table (bench/RESULTS.md keeps it). Stop it with
Ctrl-C (SIGINT: a node start installs Ray's own SIGTERM handler in this process); the run
under test, its supervisor and the cluster are stopped with it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from chaos_inject import Injector  # noqa: E402

CLUSTER = (2, 4)  # nodes × fake GPUs
BUDGET = 100  # recoveries per role: the benchmark measures recovery, not the crash-loop stop
LIMIT = 5  # a disturbed run still going after 5 × the undisturbed time is stopped
GRPO = {"iterations": 24, "prompts": 16, "samples": 4, "new_tokens": 24}


def grpo_sets(model: Path) -> list[str]:
    """The actor spread over both nodes (a lost node takes a rank), two engine actors."""
    prompts = GRPO["iterations"] * GRPO["prompts"]  # each iteration new prompts
    # the packaged GSM8K prompts (1,319) last 82 iterations: longer runs take more episodes
    episodes = -(-GRPO["iterations"] // 82)
    return [f"actor.model_name_or_path={model}", f"data.max_samples={prompts}",
            f"train.num_episodes={episodes}",
            f"rollout.batch_size={GRPO['prompts']}",
            f"rollout.n_samples_per_prompt={GRPO['samples']}",
            f"rollout.max_new_tokens={GRPO['new_tokens']}",
            "reward.sources=rule:target:e", "train.batch_size=32", "train.micro_batch_size=16",
            "actor.adam.lr=1e-3", "actor.lr_warmup_ratio=0", "num_threads=1",
            f"train.max_iterations={GRPO['iterations']}", "algo.kl.init_coef=0.01",
            "placement.num_cpus=0.5", "actor.num_nodes=2", "actor.num_gpus_per_node=1",
            "rollout.engine=vllm", "vllm.num_engines=2", "vllm.max_num_seqs=16",
            "train.colocate_all=false"]


def dpo_sets(model: Path, data: Path, epochs: int) -> list[str]:
    """Two ranks, one per node."""
    return [f"model.model_name_or_path={model}", "num_threads=1", "lr_warmup_ratio=0",
            "train.batch_size=8", "train.micro_batch_size=4", f"train.max_epochs={epochs}",
            "data.output_key=output", "data.prompt_key=prompt", "data.input_template=null",
            "data.apply_chat_template=true", f"data.dataset={data}", "adam.lr=1e-3",
            "placement.num_gpus=1", "placement.num_nodes=2", "placement.num_gpus_per_node=1",
            "placement.num_cpus=0.5", "ckpt.save_steps=4"]


def trained(store: str, run_id: str) -> Any:
    """Whether the run's first training step committed (its first checkpoint exists)."""
    tasks = Path(store, "runs", run_id, "tasks")
    return lambda: (tasks / "iter-0000/learn.json").exists() or \
        (tasks / "train-0000.json").exists()


def run_once(flow: str, sets: list[str], store: str, run_id: str, address: str,
             rate: float | None, undisturbed: float, seed: int, sim,
             from_start: bool = False, kinds: tuple[str, ...] = ()) -> dict:
    """One supervised run; with `rate`, under the injector."""
    cmd = [sys.executable, "-m", "alignflow.cli", "run", flow, "--address", address,
           "--run-id", run_id, "--seed", "1", "--store", store, "--supervise",
           *[a for s in sets for a in ("--set", s)]]
    log = Path(store) / f"{run_id}.log"
    env = dict(os.environ, ALIGNFLOW_PLACEMENT_TIMEOUT="120", ALIGNFLOW_RETRY_BASE="0.2",
               ALIGNFLOW_MAX_RESTARTS=str(BUDGET))
    # the undisturbed run has no limit (its time is the measure); a disturbed one LIMIT x it
    start, timeout = time.time(), max(300, LIMIT * undisturbed) if rate else 86400.0
    with log.open("w") as out:
        sup = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    injector = Injector(sim, run_id, psutil.Process(sup.pid), undisturbed * (rate or 0) / 100,
                        seed, kinds=kinds or KINDS[flow], horizon=timeout,
                        armed=None if from_start else trained(store, run_id))
    if rate:
        injector.start()
    try:
        code = injector.wait(sup, timeout=timeout)
    except TimeoutError:
        code = None  # stopped: not finished within LIMIT × the undisturbed time
    finally:
        faults = injector.stop() if rate else []
        _end(sup)
    return {"flow": flow, "run_id": run_id, "rate": rate, "exit": code,
            "wall_s": round(time.time() - start, 1), "faults": [vars(f) for f in faults],
            "skipped": [vars(f) for f in injector.skipped],
            "skipped_count": len(injector.skipped),
            "faults_from_s": injector.armed_at if rate else None,
            "log": str(log)}


def _end(sup: subprocess.Popen) -> None:
    """A supervisor still running (the bench stopped): its driver and itself, by pid."""
    if sup.poll() is None:
        drivers = psutil.Process(sup.pid).children()
        sup.kill()  # first, or it starts another driver
        sup.wait()
        for child in drivers:
            child.kill()


KINDS = {"grpo": ("actor", "engine", "node", "driver"), "dpo": ("actor", "node", "driver")}


def weights_sha(store, run_id: str) -> str:
    from alignflow.flows.control import api

    folder = api.get_output(run_id, store=store)["model"]
    digest = hashlib.sha256()
    for path in sorted(p for p in store.list(folder) if p.endswith(".safetensors")):
        digest.update(store.read_bytes(path))
    return digest.hexdigest()


def rollout_counts(store, run_id: str) -> dict:
    """Lost and doubled rollouts of a GRPO run, by SQL over the committed rows."""
    from alignflow.catalog.catalog import Catalog

    with Catalog(store) as cat:
        row = cat.sql("SELECT count(*) AS n, count(DISTINCT (iteration, prompt_id, sample_idx)) "
                      "AS uniq, count(DISTINCT (iteration, task_key)) AS keyed, "
                      "count(DISTINCT iteration) AS iters FROM rollouts WHERE run_id = ?",
                      [run_id]).to_pylist()[0]
    from alignflow.flows.control import api

    iterations = api.get_output(run_id, store=store)["iterations"]
    expected = iterations * GRPO["prompts"] * GRPO["samples"]
    return {"rollouts": row["n"], "lost": expected - row["uniq"],
            "twice": row["n"] - row["uniq"] + row["keyed"] - row["iters"]}


def judge(res: dict, store, base: dict | None) -> dict:
    from alignflow.flows.control import api
    from alignflow.flows.journal import runs

    status = api.get_status(res["run_id"], store=store) if store.exists(
        runs.run_json(res["run_id"])) else "NOT STARTED"
    res["finished"] = res["exit"] == 0 and status == runs.SUCCESSFUL
    res["status"] = status
    meta = runs.read_run(store, res["run_id"])
    res["drivers"], res["recoveries"] = meta.get("drivers"), meta.get("recoveries") or {}
    if res["finished"]:
        res["weights"] = weights_sha(store, res["run_id"])
        if res["flow"] == "grpo":
            res.update(rollout_counts(store, res["run_id"]))
    if base is not None:
        res["ettr"] = round(base["wall_s"] / res["wall_s"], 3)
        res["bitwise"] = res.get("weights") == base.get("weights")
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", default="grpo,dpo")
    parser.add_argument("--rates", default="10,5", help="percent of undisturbed time per fault")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", default=None)
    parser.add_argument("--iterations", type=int, default=GRPO["iterations"])
    parser.add_argument("--new-tokens", type=int, default=GRPO["new_tokens"],
                        help="GRPO tokens generated per sample (the work of an iteration)")
    parser.add_argument("--epochs", type=int, default=3, help="DPO epochs")
    parser.add_argument("--from-start", action="store_true",
                        help="inject from the driver's start (default: from the first "
                             "committed training step, when the run's workers are up)")
    parser.add_argument("--kinds", default="",
                        help="only these fault kinds (comma-separated; default: every kind "
                             "the flow has), e.g. node, to time one kind's recovery")
    parser.add_argument("--bracket", action="store_true",
                        help="run the undisturbed run again after the disturbed ones; ETTR "
                             "against the mean of both (a machine whose speed drifts)")
    parser.add_argument("--ray-health-defaults", action="store_true",
                        help="the head with Ray's own node health checks, not alignflow's")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up (finally) when stopped
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from alignflow.artifacts.store import Store
    from alignflow.tasks.simulate import node_health
    from alignflow.tasks.simulate.cluster import SimulatedCluster
    from alignflow.tasks.zoo.registry import models_dir
    from alignflow.tasks.zoo.tiny import build_tiny_model
    from tests.offline.conftest import _write_jsonl, addition_rows

    where = args.store or tempfile.mkdtemp(prefix="chaos-")
    store = Store.open(where)
    model = build_tiny_model(models_dir() / "tiny-llama")
    data = _write_jsonl(Path(where) / "pairs.jsonl", addition_rows(96, seed=0))
    GRPO["iterations"], GRPO["new_tokens"] = args.iterations, args.new_tokens
    sets = {"grpo": grpo_sets(model), "dpo": dpo_sets(model, data, args.epochs)}
    results = []
    health = node_health.RAY_DEFAULTS if args.ray_health_defaults else node_health.ENV
    with SimulatedCluster(*CLUSTER, health=health) as sim:
        sim.connect()
        for flow in args.flows.split(","):
            base = run_once(flow, sets[flow], where, f"{flow}-base", sim.address, None, 0,
                            args.seed, sim)
            base = judge(base, store, None)
            results.append(base)
            print(json.dumps(base), flush=True)
            disturbed, kinds = [], tuple(k for k in args.kinds.split(",") if k)
            for rate in (float(r) for r in args.rates.split(",")):
                res = run_once(flow, sets[flow], where, f"{flow}-r{rate:g}", sim.address,
                               rate, base["wall_s"], args.seed, sim, args.from_start,
                               kinds)
                disturbed.append(judge(res, store, base))
                print(json.dumps(disturbed[-1]), flush=True)
            results += disturbed
            if args.bracket:
                after = judge(run_once(flow, sets[flow], where, f"{flow}-base-after",
                                       sim.address, None, 0, args.seed, sim), store, None)
                results.append(bracket(base, after, disturbed))
                print(json.dumps(after), flush=True)
    print(table(results))


def bracket(base: dict, after: dict, disturbed: list[dict]) -> dict:
    """ETTR against the mean of an undisturbed run before and one after the disturbed ones,
    so that a machine whose speed drifts over the bench's half hour moves both sides alike
    (the ETTR against the first alone is kept as `ettr_first_base`)."""
    undisturbed = (base["wall_s"] + after["wall_s"]) / 2
    for res in disturbed:
        res["ettr_first_base"] = res["ettr"]
        res["ettr"] = round(undisturbed / res["wall_s"], 3)
        res["undisturbed_s"] = [base["wall_s"], after["wall_s"]]
    after["bitwise"] = after.get("weights") == base.get("weights")
    return after


def table(results: list[dict]) -> str:
    head = ("| flow | fault rate | faults (kinds) | finished unattended | wall s | ETTR | "
            "rollouts lost / twice | weights = undisturbed |\n|---|---|---|---|---|---|---|---|")
    rows = []
    for r in results:
        rate = f"1 per {r['rate']:g}%" if r["rate"] else "none"
        lost = f"{r['lost']} / {r['twice']}" if "lost" in r else "n/a"
        skipped = r.get("skipped") or []
        rows.append(f"| {r['flow']} | {rate} | {len(r['faults'])} ({_kinds(r['faults'])})"
                    f"{f'; {len(skipped)} skipped ({_kinds(skipped)})' if skipped else ''} | "
                    f"{'yes' if r['finished'] else 'no'} | {r['wall_s']} | "
                    f"{r.get('ettr', 1.0) if r['finished'] else '-'} | {lost} | "
                    f"{('yes' if r.get('bitwise', True) else 'no') if r['finished'] else '-'} |")
    return "\n".join([head, *rows])


def _kinds(faults: list[dict]) -> str:
    """'3 actor, 2 node': the faults counted by kind."""
    kinds: dict[str, int] = {}
    for f in faults:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    return ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) or "-"


if __name__ == "__main__":
    main()
