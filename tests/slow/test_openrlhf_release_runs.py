"""One OpenRLHF example script per algorithm and per release line (0.5 → 0.11; a script that
is the same file at several tags runs once) runs two iterations / optimizer steps on the tiny
model, in this process on the inline executor: the script's own flags with the places
swapped (tests/openrlhf_launch.py) and its sizes shrunk to a CPU run, whatever spelling of
its release they have; `--save_path` (or `ckpt.output_dir`) receives the final HF folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alignflow.cli import main
from alignflow.flows.config.sources import Keys
from alignflow.flows.loader import load_flow
from tests.openrlhf_launch import places, release_launches, swapped

pytestmark = pytest.mark.slow

# (algorithm, release line, fixture file): the first script of each pair that passes the dry
# run (tests/fast/test_openrlhf_releases.py), one run per file
PICKS = [
    ("sft", "v0.5.9.post1", "train_conditional_llama@v0.5.9.post1.sh"),
    ("dpo", "v0.5.9.post1", "train_dpo_llama@v0.5.9.post1.sh"),
    ("distill", "v0.5.9.post1", "train_knowledge_distillation@v0.5.9.post1.sh"),
    ("kto", "v0.5.9.post1", "train_kto_llama@v0.5.9.post1.sh"),
    ("ppo", "v0.5.9.post1", "train_ppo_llama@v0.5.9.post1.sh"),
    ("prm", "v0.5.9.post1", "train_prm_mistral@v0.5.9.post1.sh"),
    ("reinforce_pp", "v0.5.9.post1", "train_reinforce_llama_ray@v0.5.9.post1.sh"),
    ("rm", "v0.5.9.post1", "train_rm_llama@v0.5.9.post1.sh"),
    ("reinforce_pp_baseline", "v0.6.4",
     "train_reinforce_baseline_llama_ray_hybrid_engine@v0.6.4.sh"),
    ("reinforce_pp", "v0.6.4", "train_reinforce_llama_ray@v0.6.4.sh"),
    ("dpo", "v0.7.5", "train_dpo_llama@v0.7.5.sh"),
    ("grpo", "v0.7.5", "train_grpo_llama_ray@v0.7.5.sh"),
    ("ppo", "v0.7.5", "train_ppo_llama_ray@v0.5.9.post1.sh"),
    ("rm", "v0.7.5", "train_rm_llama@v0.7.5.sh"),
    ("grpo", "v0.8.11", "train_dapo_ray_hybrid_engine@v0.8.11.sh"),
    ("dpo", "v0.8.11", "train_dpo_llama@v0.8.11.sh"),
    ("distill", "v0.8.11", "train_knowledge_distillation@v0.8.11.sh"),
    ("kto", "v0.8.11", "train_kto_llama@v0.8.11.sh"),
    ("ppo", "v0.8.11", "train_ppo_llama_ray@v0.8.11.sh"),
    ("prm", "v0.8.11", "train_prm_mistral@v0.8.11.sh"),
    ("reinforce_pp_baseline", "v0.8.11",
     "train_reinforce_baseline_llama_ray_agent_async@v0.8.11.sh"),
    ("reinforce_pp", "v0.8.11", "train_reinforce_llama_ray_hybrid_engine@v0.8.11.sh"),
    ("rm", "v0.8.11", "train_rm_llama@v0.8.11.sh"),
    ("dpo", "v0.9.10", "train_dpo_llama@v0.9.10.sh"),
    ("ppo", "v0.9.10", "train_ppo_ray_slurm@v0.9.10.sh"),
    ("rm", "v0.9.10", "train_rm@v0.9.10.sh"),
    ("sft", "v0.9.10", "train_sft@v0.9.10.sh"),
    ("grpo", "v0.10.4", "train_dapo_ray_hybrid_engine@v0.10.4.sh"),  # = v0.11.0's
    ("dpo", "v0.10.4", "train_dpo_llama@v0.10.4.sh"),
    ("ppo", "v0.10.4", "train_ppo_ray_slurm@v0.10.4.sh"),
    ("rm", "v0.10.4", "train_rm@v0.10.4.sh"),
    ("sft", "v0.10.4", "train_sft@v0.10.4.sh"),
]
RL = {"rollout.n_samples_per_prompt": "2", "rollout.batch_size": "2",
      "rollout.micro_batch_size": "2", "train.batch_size": "4", "train.micro_batch_size": "2",
      "data.max_len": "48", "rollout.max_new_tokens": "4", "data.max_samples": "4",
      "train.max_epochs": "1", "train.num_episodes": "1", "algo.ptx.max_samples": "4"}
OFFLINE = {"train.batch_size": "2", "train.micro_batch_size": "1", "data.max_len": "48",
           "data.max_samples": "8", "train.max_epochs": "1"}
LENGTHS = {"prompt_max_len": "44", "generate_max_len": "4"}  # their release's (era.py)
PRM_DATA = {"placeholder_token": "#"}  # the data's step marker (ки is 4 tokens here)


def shrink(flow: str, flags: list[str]) -> tuple[list[str], list[str]]:
    """(the flags with every size key given a CPU size, `--set` items for the sizes no flag
    names), in whatever spelling the script's release has."""
    _fn, cls = load_flow(flow)
    keys, sizes = Keys.of(cls), dict(RL if "rollout.batch_size" in Keys.of(cls).paths
                                     else OFFLINE)
    out, i = [], 0
    while i < len(flags):
        name = flags[i][2:].partition("=")[0] if flags[i].startswith("--") else ""
        takes = "=" not in flags[i] and i + 1 < len(flags) and not flags[i + 1].startswith("--")
        found = keys.canonical(name.replace("-", "_")) if name else ()
        small = {**LENGTHS, **PRM_DATA}.get(name) or next(
            (sizes[k] for k in found if k in sizes), None)
        sizes = {k: v for k, v in sizes.items() if k not in found}
        if small is not None:
            out += [f"--{name}", small]
            i += 2 if takes else 1
            continue
        out.append(flags[i])
        i += 1
    return out, [f"{k}={v}" for k, v in sizes.items() if k in keys.paths]


OFFLINE_FLOWS = ("sft", "csft", "dpo", "rm", "kto", "prm", "distill")


@pytest.mark.parametrize("flow,tag,file", PICKS, ids=[f"{f}-{t}" for f, t, _ in PICKS])
def test_release_script_runs_two_iterations(flow, tag, file, tmp_path, tiny_model_dir,
                                            tiny_rm_dir, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")  # --use_wandb: no W&B server here
    where = places(tmp_path, tiny_model_dir)
    launch = release_launches(file)[0]
    assert launch.flow == flow
    flags, sets = shrink(flow, swapped(launch, where))
    cap = "train.max_steps=2" if flow in OFFLINE_FLOWS else "train.max_iterations=2"
    out = Path(where["out"])
    argv = ["run", flow, *flags, "--ignore-hardware", "--executor", "inline", "--store",
            str(tmp_path / "store"), "--set", cap, "--set", "num_threads=1"]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 0, capsys.readouterr().err[-2000:]
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    if "iterations" in result:
        assert result["iterations"] == 2
    assert (out / "config.json").is_file(), f"--save_path got nothing: {sorted(out.iterdir())}"
