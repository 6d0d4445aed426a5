"""ZeRO-2/3 training steps on one GPU: `DeepSpeedTrainer` against `TorchTrainer`.

Both trainers come from `trainers.build.build_trainer` (the path a host takes) on the tiny
model on cuda; three steps of two accumulated micro-batches with a warmup-cosine LR must
give the same losses, gradient norms and LRs, and `state_dict_for_sync` (gathered under
ZeRO-3) the same weights, to GPU float tolerance (the CPU suite holds them to 1e-6/2e-5).
The DeepSpeed trainer is built as a host builds it (`load_trainer`): under ZeRO-3 the model
loads partitioned (`zero.Init`, `partitioned_at_load`), and its sync streams one gathered
parameter at a time (`sync_peak_extra_mib`: the GPU memory the sync adds; issue 21 §3.9).
"""

from __future__ import annotations

import time

from bench.gpu_check.checks.common import CheckFailed, cuda, run, tiny_model_dir

LOSS_ATOL, NORM_RTOL, WEIGHT_ATOL = 1e-4, 1e-3, 1e-4
SCHEDULE = dict(lr=1e-3, lr_warmup_ratio=0.34, min_lr_ratio=0.1, total_steps=3,
                weight_decay=0.1, train_batch_size=4, micro_train_batch_size=2)


def _trainers(torch, stage: int) -> tuple:
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.build import build_trainer, load_trainer
    from alignflow.tasks.trainers.deepspeed.section import DSConfig

    folder, cfg = tiny_model_dir(), TrainerConfig(**SCHEDULE)
    ref = build_trainer(load_causal_lm(folder).cuda(), cfg, DSConfig())
    device, loaded = torch.device("cuda", torch.cuda.current_device()), {}

    def load():
        model = load_causal_lm(folder)
        loaded["partitioned"] = all(hasattr(p, "ds_id") for p in model.parameters())
        return model
    ds = load_trainer(load, cfg, DSConfig(zero_stage=stage), device)
    return ds, ref, loaded["partitioned"]


def _loss(model, batch):
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {}


def _batches(torch, seed: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 512, (4, 16), generator=g).cuda()
    return [{"input_ids": c} for c in ids.split(2)]


def check(argv: list[str]) -> dict:
    torch = cuda()
    stage = int(argv[0]) if argv else 2
    ds, ref, partitioned = _trainers(torch, stage)
    steps, start = [], time.perf_counter()
    for step in range(3):
        md, mr = ds.step(_batches(torch, step), _loss), ref.step(_batches(torch, step), _loss)
        steps.append({k: (md[k], mr[k]) for k in ("loss", "grad_norm", "lr")})
    seconds = time.perf_counter() - start
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    for _name, _tensor in ds.state_dict_for_sync():  # streamed: nothing kept
        pass
    sync_extra = (torch.cuda.max_memory_allocated() - base) / 2**20
    weights, reference = dict(ds.state_dict_for_sync()), dict(ref.state_dict_for_sync())
    worst = max((weights[k].float() - v.float()).abs().max().item() for k, v in reference.items())
    figures = {"stage": ds.zero_stage, "trainer": type(ds).__name__, "steps": steps,
               "partitioned_at_load": partitioned, "sync_peak_extra_mib": round(sync_extra, 2),
               "max_weight_diff": worst, "seconds_3_steps_both": round(seconds, 2),
               "summary": f"ZeRO-{ds.zero_stage}: losses {[round(s['loss'][0], 4) for s in steps]}"
                          f", max |Δw| {worst:.1e}"}
    bad = [f"step {i} {k}: {a} vs {b}" for i, s in enumerate(steps) for k, (a, b) in s.items()
           if abs(a - b) > (LOSS_ATOL if k != "grad_norm" else NORM_RTOL * abs(b))]
    if stage == 3 and not partitioned:
        bad.append("ZeRO-3 model was loaded whole (no zero.Init)")
    if set(weights) != set(reference) or worst > WEIGHT_ATOL or bad:
        raise CheckFailed(f"ZeRO-{stage} departs from TorchTrainer: "
                          f"{bad[:1] or [f'max |Δw| {worst:.1e}']}", figures)
    return figures


if __name__ == "__main__":
    run(check)
