"""Trainer sleep: how much GPU memory `tasks/trainers/sleep.py:sleep_trainer` frees.

A ~170M Llama (random weights from a config: nothing to download) is trained one step by
the trainer a run would build (`trainers.build.build_trainer`: PyTorch, ZeRO-2 or ZeRO-3),
so weights, gradients and AdamW state exist; then `sleep_trainer` and `wake_trainer`, as
`ModelHost.idle`/`wake` do, and one more step. Every backend should free about all of it:
under ZeRO DeepSpeed's `offload_states` moves its flat buffers, master weights and moments
(issue 21 §3.6; before, only the module moved and ZeRO freed about nothing).
"""

from __future__ import annotations

from bench.gpu_check.checks.common import CheckFailed, cuda, run

FREED_ENOUGH = 0.9
MODEL = dict(vocab_size=49152, hidden_size=768, intermediate_size=2048, num_hidden_layers=20,
             num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=1024,
             tie_word_embeddings=True)
BACKENDS = {"torch": None, "zero2": 2, "zero3": 3}


def _gib(n: int) -> float:
    return round(n / 2**30, 3)


def _trainer(torch, stage: int | None) -> tuple:
    from transformers import LlamaConfig, LlamaForCausalLM

    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.build import build_trainer
    from alignflow.tasks.trainers.deepspeed.section import DSConfig

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**MODEL)).cuda()
    cfg = TrainerConfig(lr=1e-4, total_steps=4, train_batch_size=2, micro_train_batch_size=1,
                        lr_warmup_ratio=0.0)
    params = sum(p.numel() for p in model.parameters())  # before ZeRO-3 cuts them to shards
    return build_trainer(model, cfg, DSConfig(zero_stage=stage)), params


def _step(torch, trainer) -> float:
    ids = torch.randint(4, MODEL["vocab_size"], (2, 128), device="cuda")

    def loss_fn(model, batch):
        out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
        return out.loss, {}
    return trainer.step([{"input_ids": c} for c in ids.split(1)], loss_fn)["loss"]


def _allocated(torch) -> int:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return torch.cuda.memory_allocated()


def check(argv: list[str]) -> dict:
    torch = cuda()
    from alignflow.tasks.trainers.sleep import sleep_trainer, wake_trainer

    backend = argv[0] if argv else "torch"
    base = _allocated(torch)
    trainer, params = _trainer(torch, BACKENDS[backend])
    first = _step(torch, trainer)
    held = _allocated(torch) - base
    sleep_trainer(trainer)
    asleep = _allocated(torch) - base
    wake_trainer(trainer, torch.device("cuda", torch.cuda.current_device()))
    second = _step(torch, trainer)
    freed = (held - asleep) / held if held else 0.0
    figures = {"backend": backend, "trainer": type(trainer).__name__,
               "params": params,
               "held_gib": _gib(held), "asleep_gib": _gib(asleep),
               "freed_fraction": round(freed, 3), "loss_before": first, "loss_after": second,
               "summary": f"{backend}: {_gib(held)} GiB held, {_gib(asleep)} GiB asleep "
                          f"({freed:.0%} freed)"}
    if not torch.isfinite(torch.tensor(second)):
        raise CheckFailed(f"the step after waking gave loss {second}", figures)
    if freed < FREED_ENOUGH:
        raise CheckFailed(f"sleep_trainer freed {freed:.0%} of {_gib(held)} GiB on {backend}; "
                          f"expected >= {FREED_ENOUGH:.0%}", figures)
    return figures


if __name__ == "__main__":
    run(check)
