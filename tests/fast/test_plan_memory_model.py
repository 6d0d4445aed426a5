"""The memory model's arithmetic: parameter counts against the published ones, KV bytes per
token, LoRA's trainable count, bytes per parameter by ZeRO stage / offload / dtype (the ZeRO
paper's (2 + 2 + K)Ψ family, as alignflow's trainers hold them), the vLLM share, the
recorded plan's round trip through run.json's codec, and `--gpu-memory`'s sizes."""

from __future__ import annotations

import dataclasses

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.config.lookup import value_at
from alignflow.flows.journal import codec
from alignflow.tasks.modeling.lora_config import LoraConfig
from alignflow.tasks.plan.build import build
from alignflow.tasks.plan.cluster import Cluster, parse_size
from alignflow.tasks.plan.hosts import TrainerPlan
from alignflow.tasks.plan.memory import states
from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.memory.known import model_shape, published
from alignflow.tasks.plan.memory.report import GIB
from alignflow.tasks.trainers.config import TrainerConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig

# the parameter counts their model cards and safetensors indexes state
PUBLISHED_PARAMS = {"meta-llama/Meta-Llama-3-8B": 8_030_261_248,
                    "meta-llama/Meta-Llama-3-70B": 70_553_706_496,
                    "meta-llama/Llama-2-7b-hf": 6_738_415_616,
                    "meta-llama/Llama-2-13b-hf": 13_015_864_320,
                    "meta-llama/Llama-2-70b-hf": 68_976_648_192,
                    "Qwen/Qwen2.5-7B": 7_615_616_512,
                    "HuggingFaceTB/SmolLM2-135M": 134_515_008}
LLAMA3 = published("meta-llama/Meta-Llama-3-8B")


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_parameter_counts_match_the_published_ones(name):
    assert published(name).params == PUBLISHED_PARAMS[name]


def test_names_resolve_offline_and_fine_tunes_keep_their_base_shape():
    tuned = model_shape("OpenRLHF/Llama-3-8b-rm-700k")
    assert tuned.params == LLAMA3.params and "Meta-Llama-3-8B" in tuned.source
    assert model_shape("nobody/unknown-model") is None


def test_kv_bytes_per_token_and_lora_parameters():
    assert LLAMA3.kv_bytes_per_token(2) == 2 * 32 * 8 * 128 * 2  # 131,072
    assert LLAMA3.kv_bytes_per_token(2, tensor_parallel=2) == 2 * 32 * 4 * 128 * 2
    assert LLAMA3.kv_bytes_per_token(2, tensor_parallel=16) == 2 * 32 * 1 * 128 * 2  # replicated
    assert LLAMA3.lora_params(16, ("all-linear",)) == 41_943_040  # peft's count at r=16
    assert LLAMA3.lora_params(8, ("q_proj", "v_proj")) == 32 * 8 * (4096 + 4096 + 4096 + 1024)


def _per_param(backend: str, stage: int | None, world: int, *, dtype: str = "bf16",
               offload: bool = False, lora: int = 0) -> tuple[float, float]:
    """(resident, learn-only) bytes per parameter of the 8B model."""
    ds = DSConfig(zero_stage=stage, adam_offload=offload, lora=LoraConfig(rank=lora)) \
        if backend == "deepspeed" else DSConfig(lora=LoraConfig(rank=lora))
    plan = TrainerPlan(role="actor", backend=backend, world_size=world, ds=ds,
                       config=TrainerConfig(dtype=dtype))
    resident, learn = states.trainer_items("actor", LLAMA3, plan, bucket=1)
    return sum(resident.values()) / LLAMA3.params, sum(learn.values()) / LLAMA3.params


ONE = 2 / LLAMA3.params  # a bucket of one bf16 element


@pytest.mark.parametrize("backend, stage, world, dtype, resident, learn", [
    ("torch", None, 8, "fp32", 4 + 8, 4),  # fp32 weights and AdamW; fp32 gradients
    ("torch", None, 8, "bf16", 2 + 4 + 8, 2),  # bf16 module, fp32 masters, bf16 gradients
    ("deepspeed", 0, 8, "bf16", 4 + 8, 4),  # stage 0: fp32 weights under autocast
    ("deepspeed", 1, 8, "bf16", 2 + 12 / 8, 2 + 4 / 8),  # 2Ψ + 2Ψ + KΨ/N (+ fp32 partition)
    ("deepspeed", 2, 8, "bf16", 2 + 12 / 8, 4 / 8 + ONE),  # 2Ψ + (2 + K)Ψ/N
    ("deepspeed", 3, 8, "bf16", (2 + 12 + 2) / 8 + ONE, None),  # (2 + 2 + K)Ψ/N
    ("deepspeed", 3, 1, "fp32", 4 + 4 + 8 + 4 + 2 * ONE, None),  # 20 B: the H100's 3.112 GiB
])
def test_bytes_per_parameter_by_stage(backend, stage, world, dtype, resident, learn):
    got = _per_param(backend, stage, world, dtype=dtype)
    assert got[0] == pytest.approx(resident, rel=1e-9)
    if learn is not None:
        assert got[1] == pytest.approx(learn, rel=1e-9)


def test_adam_offload_leaves_the_weights_and_the_buckets():
    assert _per_param("deepspeed", 3, 4, offload=True)[0] == pytest.approx(2 / 4 + ONE)
    assert _per_param("deepspeed", 2, 4, offload=True) == pytest.approx((2, ONE))


def test_lora_trains_its_adapters_only():
    t = LLAMA3.lora_params(16, ("all-linear",)) / LLAMA3.params
    resident, learn = _per_param("torch", None, 1, lora=16)
    assert resident == pytest.approx(2 + 2 * t + (4 + 8) * t) and learn == pytest.approx(2 * t)


def _plan(flags: list[str]):
    checked = check_run("ppo", None, [], flags, check=False, cluster=Cluster.parse("1x8"))
    return checked, MemoryAsk.of(lambda key: value_at(checked.config, key))


FLAGS = ["--actor.model_name_or_path", "meta-llama/Meta-Llama-3-8B", "--actor.num_gpus_per_node",
         "4", "--vllm.num_engines", "2", "--ds.zero_stage", "3", "--ds.param_dtype", "bf16",
         "--train.colocate_all", "false", "--rollout.engine", "vllm"]


def test_the_plan_records_its_memory_in_run_json():
    checked, ask = _plan(FLAGS)
    plan = build(dataclasses.replace(checked.config._ask(), memory=ask), checked.plan.cluster)
    assert plan.memory is not None and plan.memory.assumed
    assert codec.decode(codec.encode(plan)) == plan
    engines = next(g for g in plan.memory.gpus if g.gpus == "vLLM engines")
    share = dict(engines.items)["vLLM share (0.95 of the GPU)"]
    assert engines.count == 2 and share == int(0.95 * 80 * GIB)


@pytest.mark.parametrize("text, size", [("80GB", 80 * GIB), ("80", 80 * GIB),
                                        ("141 GiB", 141 * GIB), ("24576MiB", 24 * GIB),
                                        ("0.5TB", 512 * GIB)])
def test_gpu_memory_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "80 GB per GPU", "-1GB", "0"])
def test_bad_gpu_memory_sizes_are_refused_in_one_line(text):
    with pytest.raises(ConfigError, match=r"^--gpu-memory .*: expected a size per GPU"):
        parse_size(text)
