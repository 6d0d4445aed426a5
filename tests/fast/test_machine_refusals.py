"""Hardware a command line asks for that this machine cannot give is refused by `--dry-run`
in one line (never at run time); `--ignore-hardware` runs the same command on what the
machine has."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    monkeypatch.setattr(Cluster, "local", classmethod(lambda cls: cls(cpus_per_node=2.0)))


def _problems(*flags: str) -> list[str]:
    try:
        check_run("grpo", None, [], ["--pretrain", "tiny-llama", *flags])
    except ConfigError as exc:
        return [str(p) for p in getattr(exc, "problems", [exc])]
    return []


def test_what_this_machine_lacks_is_refused_before_anything_runs(tiny_model_dir):
    (vllm,) = _problems("--vllm_num_engines", "2")
    assert vllm.startswith("vllm.num_engines = 2: vLLM is not installed on this machine")
    (flash,) = _problems("--flash_attn")
    assert flash.startswith("ds.attn_implementation = 'flash_attention_2': flash attention "
                            "needs a GPU")
    assert any(p.startswith("vllm.tensor_parallel_size > 1: tensor parallelism needs GPUs")
               for p in _problems("--vllm_num_engines", "1", "--vllm_tensor_parallel_size", "2"))
    assert _problems("--actor_num_gpus_per_node", "2") == []  # CPU workers (DISTRIBUTED.md)


def test_ignore_hardware_runs_a_gpu_script_here(tiny_model_dir):
    checked = check_run("grpo", None, [], ["--pretrain", "tiny-llama", "--vllm_num_engines",
                                           "2", "--flash_attn", "--actor_num_gpus_per_node", "8"],
                        ignore_hardware=True)
    assert checked.config.vllm.num_engines == 0 and checked.config.actor.num_gpus_per_node == 1
    assert checked.config.ds.attn_implementation == "sdpa"
    assert sum("ignored (--ignore-hardware)" in n for n in checked.notes) == 3
