"""A hybrid engine's vLLM share beside its trainer rank (`--colocate_all_models`, OpenRLHF's
8 × TP1 and 4 × TP2 on 1×8). OpenRLHF hands `--vllm.gpu_memory_utilization` (default 0.95)
to every engine as given, hybrid or not (`trainer/ray/vllm_engine.py:create_vllm_engines`);
its hybrid scripts set it themselves (0.5-0.75). alignflow passes the user's value too, and
where it cannot fit beside the rank's planned peak on a GPU of known size (`--gpu-memory`),
the dry run refuses in one line naming the flag and a value that fits
(`tasks/plan/memory/fixes.py`). Every rank of a per-rank hybrid host holds an engine, so
every rank's GPU is counted with one (`tasks/plan/memory/layout.py`)."""

from __future__ import annotations

import json

import pytest

from alignflow.cli import main
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.memory.known import PUBLISHED

LLAMA2_7B = "meta-llama/Llama-2-7b-hf"
HYBRID = ["--train.colocate_all", "--actor.num_gpus_per_node", "8", "--ref.num_gpus_per_node",
          "8", "--algo.kl.init_coef", "0.01", "--reward.sources", "rule:target:e",
          "--rollout.engine", "vllm", "--train.batch_size", "128", "--rollout.batch_size",
          "1024", "--data.max_len", "2048", "--ds.zero_stage", "3", "--ds.param_dtype", "bf16",
          "--actor.gradient_checkpointing_enable", "--ds.packing_samples",
          "--vllm.enable_sleep", "--ds.enable_sleep"]
TP1, TP2 = ["--vllm.num_engines", "8"], ["--vllm.num_engines", "4",
                                          "--vllm.tensor_parallel_size", "2"]


@pytest.fixture(autouse=True)
def no_vllm_here(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    monkeypatch.setattr(rules, "vllm_openmp_loaded", lambda: False)


@pytest.fixture
def model(tmp_path) -> str:
    """A folder holding only Llama-2-7B's published config.json: what a dry run reads."""
    (tmp_path / "config.json").write_text(json.dumps(
        {**PUBLISHED[LLAMA2_7B], "model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    return str(tmp_path)


def _dry(capsys, model: str, *flags: str) -> tuple[int, str, str]:
    code = main(["run", "grpo", "--dry-run", "--cluster", "1x8", "--gpu-memory", "80GiB",
                 "--actor.model_name_or_path", model, *HYBRID, *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


@pytest.mark.parametrize("engines", [TP1, TP2], ids=["8xTP1", "4xTP2"])
def test_a_share_that_leaves_no_room_for_the_rank_is_refused_with_one_that_fits(
        capsys, model, engines):
    code, out, err = _dry(capsys, model, *engines, "--vllm.gpu_memory_utilization", "0.9")
    assert code == 2
    (line,) = err.splitlines()
    assert line.startswith("error: GPU memory: models with a vLLM ") and "(8 GPU(s))" in line
    assert line.endswith("--vllm.gpu_memory_utilization 0.75"), line
    code, out, err = _dry(capsys, model, *engines, "--vllm.gpu_memory_utilization", "0.75")
    assert code == 0, err
    assert "fits: 1 node(s) × 8 GPU(s)" in out


def test_every_rank_of_a_per_rank_hybrid_host_counts_its_engine(capsys, model):
    code, out, _err = _dry(capsys, model, *TP1, "--vllm.gpu_memory_utilization", "0.5")
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.startswith("  models ")]
    gpus = [r for r in rows if r[1] == "with"]  # the memory rows: "models with a vLLM ..."
    assert len(gpus) == 1 and gpus[0][5] == "×8" and "engine" in gpus[0]
