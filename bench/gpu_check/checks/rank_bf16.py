"""A rank's device and bf16 training on CUDA (issue 21 §3.11, §3.10).

`host_device` must make the rank's GPU CUDA's current device (here LOCAL_RANK=0 as under
torchrun; on one GPU that is all one can see). Then one step of the PyTorch trainer and of
DeepSpeed ZeRO-2 with `param_dtype bf16` on the tiny model: the module's parameters must be
bf16, the optimizer's fp32 (master weights), the sync must send bf16 (half the bytes of the
fp32 weights), and the loss finite.
"""

from __future__ import annotations

import math
import os

from bench.gpu_check.checks.common import CheckFailed, cuda, run, tiny_model_dir


def _loss(model, batch):
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {}


def _bf16_step(torch, stage: int | None) -> dict:
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.build import load_trainer
    from alignflow.tasks.trainers.deepspeed.section import DSConfig

    ds = DSConfig() if stage is None else DSConfig(zero_stage=stage)
    cfg = TrainerConfig(lr=1e-3, total_steps=2, dtype="bf16")
    device = torch.device("cuda", torch.cuda.current_device())
    trainer = load_trainer(lambda: load_causal_lm(tiny_model_dir()), cfg, ds, device)
    ids = torch.randint(4, 512, (2, 16), device=device)
    loss = trainer.step([{"input_ids": ids}], _loss)["loss"]
    optimizer = getattr(trainer, "optimizer", None) or trainer.engine.optimizer.optimizer
    synced = dict(trainer.state_dict_for_sync())
    return {"loss": loss, "params": sorted({str(p.dtype) for p in trainer.model.parameters()}),
            "stepped": sorted({str(p.dtype) for g in optimizer.param_groups
                               for p in g["params"]}),
            "sync_bytes": sum(t.nbytes for t in synced.values()),
            "sync_numel": sum(t.numel() for t in synced.values())}


def check(argv: list[str]) -> dict:
    torch = cuda()
    from alignflow.tasks.modeling.device import host_device

    os.environ.setdefault("LOCAL_RANK", "0")
    device = host_device(1)
    figures = {"device": str(device), "current": torch.cuda.current_device(),
               "torch": _bf16_step(torch, None), "zero2": _bf16_step(torch, 2)}
    bad = [] if device.index == torch.cuda.current_device() == 0 else ["device not set"]
    for name in ("torch", "zero2"):
        f = figures[name]
        if f["params"] != ["torch.bfloat16"] or f["stepped"] != ["torch.float32"]:
            bad.append(f"{name}: params {f['params']}, optimizer {f['stepped']}")
        if f["sync_bytes"] != 2 * f["sync_numel"] or not math.isfinite(f["loss"]):
            bad.append(f"{name}: sync {f['sync_bytes']} bytes for {f['sync_numel']} values")
    figures["summary"] = "; ".join(bad) or "bf16 params, fp32 masters, bf16 sync, device set"
    if bad:
        raise CheckFailed(bad[0], figures)
    return figures


if __name__ == "__main__":
    run(check)
