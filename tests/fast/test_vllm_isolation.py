"""An in-process vLLM engine in a rank of a trainer's group gets a world of its own (issue 21
§3.8): vLLM's `uni` worker would adopt the trainer's torch.distributed group as its world
(and build its groups over every trainer rank), so there the worker runs as a process of its
own (`mp`) started without the trainer group's variables; alone in its process the engine
keeps the in-process worker. vLLM is replaced by a recorder of what `LLM(...)` is given."""

from __future__ import annotations

import sys
import types

from tests.fixtures.ranks import run_ranks


def _build(rank: int, world: int, port: int, model_dir: str) -> dict:
    import os

    import torch.distributed as dist

    from alignflow.tasks.engines.vllm.config import VLLMEngineConfig
    from alignflow.tasks.engines.vllm.engine import VLLMEngine

    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        dist.init_process_group("gloo", init_method="env://")
    seen: dict = {}

    class LLM:
        def __init__(self, **kwargs) -> None:
            seen["backend"] = kwargs["distributed_executor_backend"]
            seen["env"] = sorted(k for k in ("MASTER_ADDR", "RANK", "WORLD_SIZE", "LOCAL_RANK")
                                 if k in os.environ)
            config = types.SimpleNamespace(get_vocab_size=lambda: 512, hf_config=None)
            self.llm_engine = types.SimpleNamespace(model_config=config)

        def collective_rpc(self, *args, **kwargs):
            return []

        def get_tokenizer(self):
            return None

    sys.modules["vllm"] = types.SimpleNamespace(LLM=LLM)
    engine = VLLMEngine(model_dir, VLLMEngineConfig())
    seen["env_after"] = "RANK" in os.environ if world > 1 else None
    seen["pack_device"] = str(engine.pack_device)
    return seen


def test_an_engine_in_a_trainer_rank_runs_its_worker_in_a_world_of_its_own(tiny_model_dir):
    lead, _ = run_ranks(_build, 2, str(tiny_model_dir))
    assert isinstance(lead, dict), lead
    assert lead["backend"] == "mp" and lead["env"] == []  # vLLM's worker: its own world
    assert lead["env_after"] is True and lead["pack_device"] == "cpu"


def test_an_engine_alone_in_its_process_keeps_the_in_process_worker(tiny_model_dir):
    (alone,) = run_ranks(_build, 1, str(tiny_model_dir))
    assert alone["backend"] == "uni"
