"""For the record: peak GPU memory and tokens/s of a generate and a learn step (tiny model).

Generation is `HFEngine.generate` (64 prompts × 64 new tokens, sampling), learning a
`TorchTrainer` step in bf16 autocast (64 rows × 256 tokens in micro-batches of 16); peaks
come from `tasks.modeling.device` as the steps' metrics do. The tiny model is far from a
real one: these figures date the node and the code, they judge nothing.
"""

from __future__ import annotations

import time

from bench.gpu_check.checks.common import cuda, run, tiny_model_dir


def _generate(torch, folder: str) -> dict:
    from alignflow.tasks.engines.base import SamplingParams
    from alignflow.tasks.engines.hf import HFEngine
    from alignflow.tasks.modeling.device import peak_gib, reset_peak
    from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer

    tokenizer = load_tokenizer(folder)
    engine = HFEngine(load_causal_lm(folder).cuda(), tokenizer, micro_rollout_batch_size=64)
    prompts = [tokenizer(f"Question: What is {i} + {i + 1}?\nAnswer:")["input_ids"]
               for i in range(64)]
    params = SamplingParams(max_new_tokens=64, seed=0)
    engine.generate(prompts[:4], params)  # warm-up: kernels, allocator
    device = torch.device("cuda", torch.cuda.current_device())
    reset_peak(device)
    start = time.perf_counter()
    samples = engine.generate(prompts, params)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens = sum(len(s.response_ids) for s in samples)
    return {"generate_tokens": tokens, "generate_tokens_per_s": round(tokens / seconds, 1),
            "generate_peak_gib": round(peak_gib(device), 4)}


def _learn(torch, folder: str) -> dict:
    from alignflow.tasks.modeling.device import peak_gib, reset_peak
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.torch_trainer import TorchTrainer

    trainer = TorchTrainer(load_causal_lm(folder).cuda(), TrainerConfig(
        dtype="bf16", total_steps=10, train_batch_size=64, micro_train_batch_size=16))
    ids = torch.randint(4, 512, (64, 256), generator=torch.Generator().manual_seed(0)).cuda()
    batches = [{"input_ids": c} for c in ids.split(16)]

    def loss_fn(model, batch):
        out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
        return out.loss, {}
    trainer.step(batches, loss_fn)  # warm-up
    device = torch.device("cuda", torch.cuda.current_device())
    reset_peak(device)
    start = time.perf_counter()
    for _ in range(3):
        trainer.step(batches, loss_fn)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"learn_tokens_per_s": round(3 * ids.numel() / seconds, 1),
            "learn_peak_gib": round(peak_gib(device), 4)}


def check(argv: list[str]) -> dict:
    torch = cuda()
    folder = tiny_model_dir()
    figures = {**_generate(torch, folder), **_learn(torch, folder)}
    figures["summary"] = (f"generate {figures['generate_tokens_per_s']:.0f} tok/s, "
                          f"learn {figures['learn_tokens_per_s']:.0f} tok/s (tiny model)")
    return figures


if __name__ == "__main__":
    run(check)
