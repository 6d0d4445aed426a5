"""Routes of a hostile store (issue 20 §8), shared by tests/slow/test_hostile_store.py and
bench/fault_sweep.py: one store holds a tampered run per route — every config field that can
name code, a URL, a folder or an address, and foreign records — plus an audit hook that a
child process loads (`sitecustomize.py`) to record every socket it opens outside 127.0.0.1.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from alignflow.flows.config import load_config
from alignflow.flows.journal import codec
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.trust.config import identity

OUTSIDE = "10.255.255.1"  # not routable: a connect attempt is the canary, never an answer
HOOK = """import os, sys
def _hook(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple):
        host = str(args[1][0])
        if host not in ("127.0.0.1", "::1", "localhost") and not host.startswith("/"):
            with open(os.environ["HOSTILE_SOCKETS"], "a") as f:
                f.write(host + "\\n")
sys.addaudithook(_hook)
"""

# route -> (config --set items, expected words of its one refusal line); {evil} is a code
# file that writes the canary, {store} the store, {out} a folder outside the store
ROUTES = {
    "sources-spelled-as-url": (["reward.sources={store}/x://../evil.py"], "names code file"),
    "sources-named": (["reward.sources=acc={evil}"], "names code file"),
    "remote-url-py-first": ([f"reward.remote_url={{evil}},http://{OUTSIDE}:9/x"],
                            "names code file"),
    "agent-spelled-as-url": (["train.agent_func_path={store}/x://../evil.py",
                              "rollout.max_new_tokens=8"],
                             "names code file"),
    "reward-url": ([f"reward.sources=http://{OUTSIDE}:9/score"], "sends the run's data"),
    "remote-url": ([f"reward.remote_url=http://{OUTSIDE}:9/a,http://{OUTSIDE}:9/b"],
                   "sends the run's data"),
    "tensorboard-dir": (["logger.tensorboard_dir={out}/tb"], "writes to"),
    "output-dir": (["ckpt.output_dir={out}/final"], "writes to"),
    # issue 40 §1: a folder spelled like a URL, as a file URL, percent-encoded, unknown scheme
    "tensorboard-spelled-as-url": (["logger.tensorboard_dir={store}/x://../../outside/tb"],
                                   "writes to"),
    "tensorboard-file-url": (["logger.tensorboard_dir=file://{out}/tb"], "writes to"),
    "tensorboard-percent": (["logger.tensorboard_dir=file://{store}/%2e%2e/outside/tb"],
                            "writes to"),
    "tensorboard-scheme": (["logger.tensorboard_dir=x://{out}/tb"], "of scheme 'x'"),
    # §2: a file or folder of the resuming machine read into the store
    "local-data": (["data.prompt_dataset={rows}"], "reads data from"),
    "local-model": (["actor.model_name_or_path={tmp}"], "reads a model from"),
    # §4: W&B switched on by the store
    "wandb-on": (["logger.wandb.key=true"], "sends the run's data to 'https://api.wandb.ai'"),
}
ROWS_CANARY = "rows-of-this-machine-7f3a"  # in a local data file no resume may copy in


def meta_of(run_id: str, cfg, **fields) -> dict:
    meta = {"format": 1, "run_id": run_id, "flow": "grpo", "flow_ref": "grpo",
            "config": codec.encode(cfg), "identity": codec.encode(identity(cfg)), "seed": 0,
            "status": "RESUMABLE", "created": time.time(), "executor": "inline",
            "code": {"refs": []}}
    meta.update(fields)
    return meta


def write_run(store: Path, meta: dict) -> None:
    folder = store / "runs" / meta["run_id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(meta))


def tamper(tmp: Path) -> dict:
    """A store under `tmp` with one tampered run per route; what each refusal must say."""
    store, out, canary = tmp / "store", tmp / "outside", tmp / "canary"
    store.mkdir()
    evil = store / "evil.py"
    evil.write_text(f"open({str(canary)!r}, 'a').write('ran\\n')\n"
                    "def reward_func(q, p, l):\n    return [0.0] * len(q)\n"
                    "class AgentExecutor: pass\n")
    rows = tmp / "rows.jsonl"
    rows.write_text(f'{{"input": "{ROWS_CANARY}", "answer": "1"}}\n')
    expected = {}
    for name, (sets, words) in ROUTES.items():
        cfg = load_config(RLConfig, sets=[s.format(evil=evil, store=store, out=out, rows=rows,
                                                    tmp=tmp) for s in sets])
        write_run(store, meta_of(name, cfg))
        expected[name] = words
    cfg = load_config(RLConfig, sets=[f"data.prompt_dataset={rows}"])
    write_run(store, {k: v for k, v in meta_of("local-data-no-identity", cfg).items()
                      if k != "identity"})
    expected["local-data-no-identity"] = "reads data from"
    _planted_wandb_key(store, expected)
    base = load_config(RLConfig)
    tagged = codec.encode(base)
    tagged["fields"]["actor"] = {"__type__": "subprocess:Popen",
                                 "fields": {"args": f"touch {canary}", "shell": True}}
    write_run(store, meta_of("foreign-record", base, config=tagged))
    expected["foreign-record"] = "holds a 'subprocess:Popen' record"
    write_run(store, meta_of("flow-module", base, flow_ref="subprocess:run"))
    expected["flow-module"] = "neither a built-in flow"
    write_run(store, meta_of("flow-file", base, flow_ref=f"{evil}:steps"))
    expected["flow-file"] = "started with flow"
    return {"store": store, "out": out, "canary": canary, "expected": expected, "tmp": tmp}


def _planted_wandb_key(store: Path, expected: dict) -> None:
    """§4: a W&B key in the stored config (alignflow stores 'true', never a key)."""
    meta = meta_of("wandb-key", load_config(RLConfig, sets=["logger.wandb.key=true"]))
    logger = meta["config"]["fields"]["logger"]["fields"]
    logger["wandb"]["fields"]["key"] = "a-stored-wandb-key-0123456789"
    write_run(store, meta)
    expected["wandb-key"] = "holds a W&B API key"


def hook_env(tmp: Path) -> dict[str, str]:
    """Environment for a child process that logs its outside connects to `<tmp>/sockets.txt`."""
    hook_dir = tmp / "hook"
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    (tmp / "sockets.txt").write_text("")
    return {"HOSTILE_SOCKETS": str(tmp / "sockets.txt"), "PYTHONPATH": str(hook_dir)}


def breaches(ctx: dict) -> list[str]:
    """What the store made happen outside it: code that ran, sockets, folders written."""
    found = [f"connected to {s}" for s in (ctx["tmp"] / "sockets.txt").read_text().split()]
    if ctx["canary"].exists():
        found.append("code named by the store ran")
    if ctx["out"].exists():
        found.append(f"wrote {ctx['out']}")
    if any(ROWS_CANARY.encode() in p.read_bytes() for p in ctx["store"].rglob("*")
           if p.is_file() and p.name != "run.json"):
        found.append("rows of a local file reached the store")
    if any((where / "wandb").exists() for where in (ctx["tmp"], Path(__file__).parents[1])):
        found.append("W&B started (its folder in the working directory)")
    return found
