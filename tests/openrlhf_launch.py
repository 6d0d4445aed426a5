"""OpenRLHF launch scripts made runnable here: tests/fixtures/openrlhf_scripts (14 of v0.9.x's
flat CLI, 12 of 0.11's dotted CLI, written to cover the flags of OpenRLHF's example scripts)
and its `releases/` folder (every script of OpenRLHF's examples/scripts at the last tag of
each minor line 0.5 → 0.11). The places they name (models, data sets, output folders, reward
and agent files) are swapped for the tiny model and local files; every other flag is kept as
written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from alignflow.flows.compat.script import Launch, read_launch, read_launches
from alignflow.tasks.zoo.registry import resolve_model

SCRIPTS = Path(__file__).parent / "fixtures" / "openrlhf_scripts"
MODEL = {"pretrain", "actor.model_name_or_path", "model.model_name_or_path", "ref_pretrain",
         "ref.model_name_or_path", "critic_pretrain", "critic.model_name_or_path",
         "teacher_model"}
REWARD_MODEL = {"reward_pretrain", "reward.model_name_or_path"}
DATA = {"prompt_data", "data.prompt_dataset", "dataset", "data.dataset", "eval_dataset",
        "eval.dataset", "pretrain_data", "algo.ptx.pretrain_data"}
OUT = {"save_path", "ckpt_path", "ckpt.path", "ckpt.output_dir", "use_tensorboard",
       "logger.tensorboard_dir"}
PY_FILE = {"remote_rm_url", "reward.remote_url"}
WANDB = {"use_wandb", "logger.wandb.key"}  # a credential: "true" with WANDB_MODE=disabled
AGENT_FILE = {"agent_func_path", "train.agent_func_path"}
AGENT = Path(__file__).resolve().parents[1] / "examples" / "agents" / "arithmetic.py"
# columns every script may name: prompt/question/context_messages, label/answer, pairs, KTO
ROW = {"prompt": "Say e", "question": "Say e", "problem": "Say e", "instruction": "Say e",
       "context_messages": "Say e", "input": "Say e #", "query": "Say e", "text": "eee e",
       "label": "e", "answer": "e", "solution": "e", "chosen": "eee", "rejected": "xyz",
       "output": "eee", "response": "eee", "value": ["+"]}
REWARD_PY = "def reward_func(queries, prompts, labels):\n    return [float(q.count('e')) for q in queries]\n"


def places(tmp: Path, tiny: Path) -> dict[str, str]:
    """The local stand-ins, written once into `tmp`."""
    data = tmp / "data.jsonl"
    rows = [dict(ROW, score=i % 2) for i in range(32)]  # score: KTO's desirable (1) or not
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp / "reward_func.py").write_text(REWARD_PY)
    return {"model": str(tiny), "reward": _reward_model(tmp), "data": str(data),
            "out": str(tmp / "out"), "py": str(tmp / "reward_func.py"), "agent": str(AGENT),
            "wandb": "true"}


def _reward_model(tmp: Path) -> str:
    """The tiny reward model, with the mean/std of its scores stored as OpenRLHF's trained
    reward models have them (`--normalize_reward` reads them)."""
    folder = tmp / "rm"
    if not folder.exists():
        shutil.copytree(resolve_model("tiny-llama-rm"), folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"mean": 0.0, "std": 1.0}))
    return str(folder)


def swapped(launch: Launch, where: dict[str, str]) -> list[str]:
    """`launch`'s flags with each place replaced (a flag's first value only)."""
    flags, out = launch.flags, []
    kinds = [(MODEL, "model"), (REWARD_MODEL, "reward"), (DATA, "data"), (OUT, "out"),
             (PY_FILE, "py"), (AGENT_FILE, "agent"), (WANDB, "wandb")]
    i = 0
    while i < len(flags):
        token = flags[i]
        name, eq, _value = token[2:].partition("=") if token.startswith("--") else ("", "", "")
        kind = next((k for names, k in kinds if name in names), None)
        value = _value if eq else (flags[i + 1] if i + 1 < len(flags) else "")
        if kind == "py" and not value.endswith(".py"):
            kind = None  # a reward server's URL stays as written
        if kind and eq:
            out.append(f"--{name}={where[kind]}")
        elif kind and i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            out += [token, where[kind]]
            i += 1
        else:
            out.append(token)
        i += 1
    return out


def load(name: str) -> Launch:
    return read_launch((SCRIPTS / name).read_text(), env={})


RELEASES = SCRIPTS / "releases"


def release_scripts() -> list[tuple[str, str, str]]:
    """(tag, script name, fixture file) of every script of every release."""
    lines = (RELEASES / "index.tsv").read_text().splitlines()[1:]
    return [tuple(line.split("\t")) for line in lines]


def release_launches(file: str) -> list[Launch]:
    return read_launches((RELEASES / file).read_text(), env={})


def all_scripts() -> list[str]:
    return sorted(p.name for p in SCRIPTS.glob("*.sh"))


def resized(flags: list[str], sizes: dict[str, str]) -> list[str]:
    """`flags` with each flag named in `sizes` given that value (added when absent): the
    script's batch sizes and lengths shrunk to a CPU run, every other flag as written."""
    out, left, i = [], dict(sizes), 0
    while i < len(flags):
        name = flags[i][2:].partition("=")[0] if flags[i].startswith("--") else ""
        if name in left:
            out += [f"--{name}", left.pop(name)]
            takes_value = "=" not in flags[i] and i + 1 < len(flags) and \
                not flags[i + 1].startswith("--")
            i += 2 if takes_value else 1
            continue
        out.append(flags[i])
        i += 1
    for name, value in left.items():
        out += [f"--{name}", value]
    return out
