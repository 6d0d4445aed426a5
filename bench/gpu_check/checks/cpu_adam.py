"""DeepSpeedCPUAdam on a GPU node: its JIT build with the node's nvcc, through the trainer.

The bundled DeepSpeed wheel has no compiled ops (`DS_BUILD_OPS=0`): the first ZeRO run
with `ds.adam_offload` builds cpu_adam with ninja and the node's CUDA toolkit into
TORCH_EXTENSIONS_DIR. This builds it the way a run does (`build_trainer` with ZeRO-2 and
adam_offload on the tiny model) and takes two steps. The review expects it to build, or
DeepSpeed to name a CUDA version mismatch between nvcc and torch; the build is announced
first in one line (`tasks/trainers/cpu_adam.py`, issue 21 §3.14), recorded as `note`.
"""

from __future__ import annotations

import math
import os
import time

from bench.gpu_check.checks.common import CheckFailed, cuda, run, tiny_model_dir


def _loss(model, batch):
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {}


def check(argv: list[str]) -> dict:
    torch = cuda()
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.build import build_trainer
    from alignflow.tasks.trainers.cpu_adam import build_note
    from alignflow.tasks.trainers.deepspeed.section import DSConfig

    note = build_note()
    start = time.perf_counter()
    trainer = build_trainer(load_causal_lm(tiny_model_dir()).cuda(),
                            TrainerConfig(lr=1e-3, total_steps=2, train_batch_size=4,
                                          micro_train_batch_size=2),
                            DSConfig(zero_stage=2, adam_offload=True))
    built = time.perf_counter() - start
    ids = torch.randint(4, 512, (4, 16), generator=torch.Generator().manual_seed(0)).cuda()
    losses = [trainer.step([{"input_ids": c} for c in ids.split(2)], _loss)["loss"]
              for _ in range(2)]
    optimizer = type(trainer.engine.optimizer.optimizer).__name__
    figures = {"build_and_init_seconds": round(built, 1), "optimizer": optimizer,
               "losses": losses, "torch_cuda": torch.version.cuda,
               "extensions_dir": os.environ.get("TORCH_EXTENSIONS_DIR"), "note": note,
               "summary": f"{optimizer} ready in {built:.0f} s; losses "
                          f"{[round(x, 4) for x in losses]}"}
    if optimizer != "DeepSpeedCPUAdam" or not all(map(math.isfinite, losses)):
        raise CheckFailed(f"expected DeepSpeedCPUAdam and finite losses, got {optimizer} "
                          f"{losses}", figures)
    return figures


if __name__ == "__main__":
    run(check)
