"""LoRA on CUDA: adapters train on a frozen base; merged weights sync into an HF engine.

The model and trainer come from `trainers.build` (`trainable_lm` with `ds.lora.rank`, then
`build_trainer`), as a host builds them, moved to cuda. After three steps the base must be
bitwise unchanged, the adapters changed, and an `HFEngine` updated from
`state_dict_for_sync()` (base + scaled B·A under plain names) must give the logits of the
peft model, and generate on cuda.
"""

from __future__ import annotations

from bench.gpu_check.checks.common import CheckFailed, cuda, run, tiny_model_dir

LOGIT_ATOL = 1e-4


def _loss(model, batch):
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {}


def _train(torch, folder: str):
    from alignflow.tasks.modeling.lora_config import LoraConfig
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.build import build_trainer, trainable_lm
    from alignflow.tasks.trainers.deepspeed.section import DSConfig

    ds = DSConfig(lora=LoraConfig(rank=8, alpha=16))
    model = trainable_lm(folder, ds).cuda()
    base = {k: v.clone() for k, v in model.state_dict().items() if "lora_" not in k}
    adapters = {k: v.clone() for k, v in model.state_dict().items() if "lora_B" in k}
    trainer = build_trainer(model, TrainerConfig(lr=3e-2, lr_warmup_ratio=0.0, total_steps=3,
                                                 train_batch_size=4, micro_train_batch_size=2),
                            ds)
    g = torch.Generator().manual_seed(0)
    losses = [trainer.step([{"input_ids": c} for c in torch.randint(
        4, 512, (4, 16), generator=g).cuda().split(2)], _loss)["loss"] for _ in range(3)]
    return trainer, base, adapters, losses


def check(argv: list[str]) -> dict:
    torch = cuda()
    from alignflow.tasks.engines.base import SamplingParams
    from alignflow.tasks.engines.hf import HFEngine
    from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer

    folder = tiny_model_dir()
    trainer, base, adapters, losses = _train(torch, folder)
    state = trainer.model.state_dict()
    base_moved = [k for k, v in base.items() if not torch.equal(state[k], v)]
    adapters_moved = sum(not torch.equal(state[k], v) for k, v in adapters.items())
    engine = HFEngine(load_causal_lm(folder).cuda(), load_tokenizer(folder))
    engine.update_weights(trainer.state_dict_for_sync(), version=1)
    ids = torch.randint(4, 512, (2, 12), generator=torch.Generator().manual_seed(1)).cuda()
    with torch.no_grad():
        trainer.model.eval()
        gap = (engine.model(input_ids=ids).logits - trainer.model(input_ids=ids).logits)
    gap = gap.abs().max().item()
    out = engine.generate([ids[0].tolist()], SamplingParams(max_new_tokens=8, seed=0))
    figures = {"losses": losses, "base_tensors_changed": len(base_moved),
               "adapters_changed": adapters_moved, "merged_logit_gap": gap,
               "generated_tokens": len(out[0].response_ids),
               "summary": f"losses {[round(x, 3) for x in losses]}, merged logit gap {gap:.1e}"}
    if base_moved or not adapters_moved or gap > LOGIT_ATOL:
        raise CheckFailed(f"LoRA on cuda: {len(base_moved)} base tensors moved, "
                          f"{adapters_moved} adapters moved, logit gap {gap:.1e}", figures)
    return figures


if __name__ == "__main__":
    run(check)
