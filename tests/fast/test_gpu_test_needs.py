"""tests/gpu says truly how many GPUs each run needs (issue 21 §3.2): the GPUs its plan
reserves, counted like the run counts them — checked here without a GPU."""

from __future__ import annotations

import pytest

from alignflow.flows.config import load_config
from alignflow.flows.loader import load_flow
from alignflow.tasks.plan import rules
from tests.gpu import test_gpu_flows as gpu


@pytest.mark.parametrize(("extra", "gpus"), [
    ({"rollout.engine": "hf"}, 1),
    ({"rollout.engine": "vllm", "vllm.enable_sleep": "true"}, 1),
    # actor, reference (OpenRLHF's default KL term) and the engine, each on its own GPU
    ({"rollout.engine": "vllm", "train.colocate_all": "false", "vllm.num_engines": "1"}, 3),
])
def test_each_gpu_test_skips_below_its_plans_gpus(monkeypatch, extra, gpus):
    monkeypatch.setattr(rules, "vllm_installed", lambda: True)
    monkeypatch.setattr(gpu, "MODEL", "tiny-llama")
    cfg = load_config(load_flow("grpo")[1], sets=gpu._sets(**extra))
    for have, runs in ((gpus - 1, False), (gpus, True)):
        monkeypatch.setattr(gpu.torch.cuda, "device_count", lambda have=have: have)
        if runs:
            gpu._needs_gpus(cfg)
        else:
            with pytest.raises(pytest.skip.Exception, match=f"needs {gpus} GPU"):
                gpu._needs_gpus(cfg)
