"""Published configurations known to run fit 80 GB GPUs, and oversized ones are refused in
one line naming the GPU, phase, item and the flags that would make them fit. Planned from
the models' published config.json (`tasks/plan/memory/known.py`): no network, no weights.

The published runs are OpenRLHF's, so they are judged as OpenRLHF holds the models
(`frozen="openrlhf"`: reference/reward ZeRO-3 shards, weights synced a tensor at a time,
DeepSpeed's states offloaded around generation with `--ds.enable_sleep`); what this version
of alignflow would do with the same flags is asserted beside, with the item that breaks it.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from alignflow.artifacts.shared import ENV as SHARED_ENV
from alignflow.cli import main
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.config.lookup import value_at
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.memory.build import memory_plan
from alignflow.tasks.plan.memory.known import PUBLISHED
from alignflow.tasks.plan.memory.report import GIB

GPU = 80 * GIB  # A100/A800/H100 80GB
LLAMA3 = "OpenRLHF/Llama-3-8b-sft-mixture"
RM = "OpenRLHF/Llama-3-8b-rm-700k"
LLAMA2_7B, LLAMA2_70B = "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf"


def _flags(text: str) -> list[str]:
    return text.split()


# OpenRLHF v0.11 examples/scripts/train_ppo_ray_hybrid_engine.sh (= the README's quick
# start for 8× A100 80GB): every model and 4 vLLM engines × TP 2 on the same 8 GPUs
HYBRID_8B = _flags(
    f"--actor.model_name_or_path {LLAMA3} --reward.model_name_or_path {RM} "
    "--ref.num_gpus_per_node 8 --reward.num_gpus_per_node 8 --critic.num_gpus_per_node 8 "
    "--actor.num_gpus_per_node 8 --vllm.num_engines 4 --vllm.tensor_parallel_size 2 "
    "--train.colocate_all --vllm.gpu_memory_utilization 0.5 --train.batch_size 128 "
    "--rollout.batch_size 1024 --data.max_len 2048 --ds.zero_stage 3 --ds.param_dtype bf16 "
    "--actor.gradient_checkpointing_enable --ds.packing_samples --vllm.enable_sleep "
    "--ds.enable_sleep --train.dynamic_batch_enable --train.max_tokens_per_gpu 16384")
# examples/scripts/train_ppo_ray_slurm.sh: 2 nodes, actor+ref and critic+reward on 4 GPUs
# each, 4 engines × TP 2 on GPUs of their own
SLURM_8B = _flags(
    f"--actor.model_name_or_path {LLAMA3} --reward.model_name_or_path {RM} "
    "--ref.num_gpus_per_node 4 --reward.num_gpus_per_node 4 --critic.num_gpus_per_node 4 "
    "--actor.num_gpus_per_node 4 --vllm.num_engines 4 --vllm.tensor_parallel_size 2 "
    "--train.colocate_critic_reward --train.colocate_actor_ref --train.micro_batch_size 8 "
    "--train.batch_size 128 --rollout.micro_batch_size 16 --rollout.batch_size 1024 "
    "--data.max_len 2048 --ds.zero_stage 3 --ds.param_dtype bf16 --ds.adam_offload "
    "--ds.packing_samples --actor.gradient_checkpointing_enable")


def _paper(model: str, actor: int, ref: int, engines: int, tp: int, micro: int,
           stage: int) -> list[str]:
    """The OpenRLHF paper's layout (§4, A800 80GB; every model with Adam offload; prompts
    and responses of up to 1024 tokens), with gradient checkpointing, as its scripts ran."""
    return _flags(
        f"--actor.model_name_or_path {model} --reward.model_name_or_path {model} "
        f"--actor.num_gpus_per_node {actor} --critic.num_gpus_per_node {actor} "
        f"--ref.num_gpus_per_node {ref} --reward.num_gpus_per_node {ref} "
        f"--vllm.num_engines {engines} --vllm.tensor_parallel_size {tp} "
        f"--train.micro_batch_size {micro} --rollout.micro_batch_size {micro} "
        "--train.batch_size 128 --rollout.batch_size 1024 --data.max_len 2048 "
        f"--rollout.max_new_tokens 1024 --ds.zero_stage {stage} --ds.param_dtype bf16 "
        "--ds.adam_offload --actor.gradient_checkpointing_enable --train.colocate_all false")


PAPER_7B = _paper(LLAMA2_7B, actor=4, ref=2, engines=4, tp=1, micro=16, stage=2)
PAPER_70B = _paper(LLAMA2_70B, actor=4, ref=4, engines=4, tp=4, micro=4, stage=3)


def _memory(flags: list[str], spec: str, frozen: str = "openrlhf", flow: str = "ppo"):
    checked = check_run(flow, None, [], flags, check=False, cluster=Cluster.parse(spec))
    ask = MemoryAsk.of(lambda key: value_at(checked.config, key),
                       kind=getattr(checked.cls, "KIND", ""))
    return memory_plan(checked.plan, dataclasses.replace(ask, frozen=frozen), GPU)


GOOD = {"hybrid 8B, 1x8": (HYBRID_8B, "1x8"), "slurm 8B, 2x8": (SLURM_8B, "2x8"),
        "paper 7B, 2x8": (PAPER_7B, "2x8"), "paper 70B, 4x8": (PAPER_70B, "4x8")}
# what this version breaks on with the same flags: (GPUs, phase, the item the phase adds,
# the largest item)
ALIGNFLOW_NOW = {
    "hybrid 8B, 1x8": ("models with a vLLM rank", "sync", "vLLM share (0.5 of the GPU)",
                       "vLLM share (0.5 of the GPU)"),  # woken for the sync beside it all
}
# separate engines fit now that a sync loads bucket by bucket (one bucket + the largest
# tensor beside the 0.95 share: `tasks/engines/vllm/engine_sync.py`)
FIT_NOW = ("slurm 8B, 2x8", "paper 7B, 2x8")


@pytest.mark.parametrize("name", sorted(GOOD))
def test_published_configurations_fit_as_openrlhf_runs_them(name):
    flags, spec = GOOD[name]
    memory = _memory(flags, spec)
    assert memory.problem() is None, memory.problem()
    assert all(g.peak <= GPU for g in memory.gpus)


@pytest.mark.parametrize("name", FIT_NOW)
def test_separate_engines_fit_this_version_too(name):
    flags, spec = GOOD[name]
    memory = _memory(flags, spec, frozen="alignflow")
    engines = next(g for g in memory.gpus if g.gpus == "vLLM engines")
    staged = dict(engines.items)["sync staging"]
    assert memory.problem() is None and engines.peak <= GPU
    assert staged < (128 << 20) + 2 * 1024**3  # one bucket + the largest tensor, not a model


@pytest.mark.parametrize("name", sorted(ALIGNFLOW_NOW))
def test_this_version_holds_them_whole_and_says_where_they_break(name):
    flags, spec = GOOD[name]
    memory = _memory(flags, spec, frozen="alignflow")
    gpus, phase, item, largest = ALIGNFLOW_NOW[name]
    over = next(g for g in memory.gpus if g.gpus == gpus)
    assert (over.phase, over.item, over.items[0][0]) == (phase, item, largest)
    assert over.peak > GPU and memory.problem().startswith(f"GPU memory: {gpus} ")


def test_the_70b_fits_this_version_now_that_its_reference_is_sharded():
    """The paper's 70B broke here on a whole reference replica (128 GiB on each of 4 GPUs)
    until the host held it as ZeRO-3 shards (`tasks/trainers/deepspeed/frozen.py`)."""
    memory = _memory(PAPER_70B, "4x8", frozen="alignflow")
    ref = next(g for g in memory.gpus if g.gpus == "ref")
    assert dict(ref.items)["ref weights"] == 68_976_648_192 * 2 // 4
    assert memory.problem() is None and all(g.peak <= GPU for g in memory.gpus)


def test_the_70b_layout_holds_its_models_in_shards_over_the_actors_four_gpus():
    memory = _memory(PAPER_70B, "4x8")
    ref = next(g for g in memory.gpus if g.gpus == "ref")
    weights = dict(ref.items)["ref weights"]
    assert weights == 68_976_648_192 * 2 // 4  # bf16, a quarter on each of the 4


# known-bad: (flags, cluster, flow, the GPUs refused first, what the refusal must name)
SEVEN_B_ON_TWO = _flags(
    f"--actor.model_name_or_path {LLAMA2_7B} --reward.model_name_or_path {LLAMA2_7B} "
    "--train.colocate_all --actor.num_gpus_per_node 2 --critic.num_gpus_per_node 2 "
    "--ref.num_gpus_per_node 2 --reward.num_gpus_per_node 2 --vllm.num_engines 2 "
    "--vllm.gpu_memory_utilization 0.5 --ds.zero_stage 2 --ds.param_dtype bf16 "
    "--train.batch_size 128 --rollout.batch_size 128 --data.max_len 2048")
NO_ADAM_OFFLOAD_70B = [f for f in PAPER_70B if f != "--ds.adam_offload"]
GREEDY_HYBRID_8B = [f for f in HYBRID_8B if f not in ("--vllm.enable_sleep", "--ds.enable_sleep")]
GREEDY_HYBRID_8B[GREEDY_HYBRID_8B.index("--vllm.gpu_memory_utilization") + 1] = "0.9"
STARVED_ENGINES_70B = [*PAPER_70B, "--vllm.gpu_memory_utilization", "0.3"]
SFT_7B_FP32 = _flags("--model.model_name_or_path Qwen/Qwen2.5-7B --placement.num_gpus 1 "
                     "--train.micro_batch_size 8 --train.batch_size 64 --data.max_len 4096")
BAD = {
    "7B PPO, every model on 2 GPUs, no offload": (
        SEVEN_B_ON_TWO, "1x2", "ppo", "GPU memory: models with a vLLM engine (2 GPU(s)) peaks at"),
    "paper 70B without Adam offload": (
        NO_ADAM_OFFLOAD_70B, "4x8", "ppo", "GPU memory: actor (4 GPU(s)) peaks at"),
    "hybrid 8B at 0.9 of the GPU, nothing asleep": (
        GREEDY_HYBRID_8B, "1x8", "ppo", "GPU memory: models with a vLLM rank (8 GPU(s))"),
    "70B engines at 0.3 of the GPU": (
        STARVED_ENGINES_70B, "4x8", "ppo", "vLLM on vLLM engines cannot start"),
    "SFT of a 7B in fp32 on one GPU": (
        SFT_7B_FP32, "1x1", "sft", "GPU memory: policy (1 GPU(s)) peaks at"),
}
FIXES = {  # a flag each refusal must offer, where one alone makes the GPUs fit
    "paper 70B without Adam offload": "--ds.adam_offload",
    "hybrid 8B at 0.9 of the GPU, nothing asleep": "--vllm.gpu_memory_utilization 0.1",
}


@pytest.mark.parametrize("frozen", ["openrlhf", "alignflow"])
@pytest.mark.parametrize("name", sorted(BAD))
def test_known_bad_configurations_are_refused_in_one_line(name, frozen):
    flags, spec, flow, refusal = BAD[name]
    memory = _memory(flags, spec, frozen=frozen, flow=flow)
    found = [p for p in memory.problems if p.startswith(refusal)]
    assert found and "\n" not in found[0], memory.problems
    if name in FIXES and frozen == "openrlhf":
        assert found[0].endswith(f"expected any of: {FIXES[name]}"), found[0]


def _folders(tmp_path) -> dict[str, str]:
    """Model folders holding only a published config.json: what a dry run reads."""
    out = {}
    for hub in (LLAMA2_7B,):
        folder = tmp_path / hub.replace("/", "--")
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(
            {**PUBLISHED[hub], "model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
        out[hub] = str(folder)
    return out


def test_the_dry_run_prints_the_peaks_and_refuses_an_oversized_gpu(capsys, tmp_path):
    model = _folders(tmp_path)[LLAMA2_7B]
    flags = [model if f == LLAMA2_7B else f for f in SEVEN_B_ON_TWO]
    assert main(["run", "ppo", "--dry-run", "--cluster", "1x2", "--gpu-memory", "80GB",
                 *flags]) == 2
    captured = capsys.readouterr()
    assert "memory: peak per GPU by phase" in captured.out
    assert any(line.startswith("  models with a vLLM engine ×2")
               for line in captured.out.splitlines())
    errors = captured.err.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith(
        "error: GPU memory: models with a vLLM engine (2 GPU(s)) peaks at"), captured.err


def test_the_offered_fix_makes_the_dry_run_fit(capsys, tmp_path, monkeypatch):
    """The paper's 7B layout with its engines at 0.99 of the GPU breaks at the engines'
    sync (a bucket staged beside the share); the refusal's fix, then the flags with it."""
    monkeypatch.setenv(SHARED_ENV, "1")  # two nodes: the store must be shared
    model = _folders(tmp_path)[LLAMA2_7B]
    flags = [model if f == LLAMA2_7B else f for f in PAPER_7B]
    assert main(["run", "ppo", "--dry-run", "--cluster", "2x8", *flags, "--gpu-memory", "80GB",
                 "--vllm.gpu_memory_utilization", "0.99"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "expected any of: --vllm.gpu_memory_utilization 0.94")
    assert main(["run", "ppo", "--dry-run", "--cluster", "2x8", *flags, "--gpu-memory", "80GB",
                 "--vllm.gpu_memory_utilization", "0.94"]) == 0
    assert "fits: 2 node(s) × 8 GPU(s)" in capsys.readouterr().out
    # the GPU's size assumed (not given): the peaks are said, nothing is refused
    assert main(["run", "ppo", "--dry-run", "--cluster", "2x8", *flags,
                 "--vllm.gpu_memory_utilization", "0.99"]) == 0
    out = capsys.readouterr().out
    assert "GPUs of 80 GiB assumed (--gpu-memory SIZE to set it)" in out
    assert "note: GPU memory: " in out and "--vllm.gpu_memory_utilization 0.94" in out


def test_gpu_memory_flag_is_checked(capsys, tmp_path):
    model = _folders(tmp_path)[LLAMA2_7B]
    flags = [model if f == LLAMA2_7B else f for f in PAPER_7B]
    assert main(["run", "ppo", "--dry-run", "--cluster", "2x8", "--gpu-memory", "lots",
                 *flags]) == 2
    assert "--gpu-memory 'lots': expected a size per GPU such as 80GB" in capsys.readouterr().err
    assert main(["run", "ppo", "--gpu-memory", "80GB", *flags]) == 2
    assert "use it with --dry-run" in capsys.readouterr().err
