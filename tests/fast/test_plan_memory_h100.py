"""The memory model against the GPU peaks measured on an H100 (bench/history/gpu.md): each
figure, with its section and date, reproduced within 15% from the model's formulas alone.

Every figure is torch's allocator (`memory_allocated` / `max_memory_allocated`), which
leaves out the CUDA context, so the model's context item is left out here too. The model
is the sleep check's random Llama: `bench/gpu_check/checks/trainer_sleep.py:MODEL`
(163,609,344 parameters). What each process held beside the measured side is read from its
benchmark script and written next to the figure.
"""

from __future__ import annotations

import pytest

from alignflow.tasks.plan.hosts import TrainerPlan
from alignflow.tasks.plan.memory import activations, states
from alignflow.tasks.plan.memory.shape import shape_of_config
from alignflow.tasks.trainers.config import TrainerConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig

MIB, GIB = 1 << 20, 1 << 30
TOLERANCE = 0.15
SLEEP_MODEL = dict(vocab_size=49152, hidden_size=768, intermediate_size=2048,
                   num_hidden_layers=20, num_attention_heads=12, num_key_value_heads=4,
                   max_position_embeddings=1024, tie_word_embeddings=True)
SHAPE = shape_of_config(SLEEP_MODEL, "random Llama 164M", "trainer_sleep.MODEL")
HIDDEN2 = 768 ** 2  # the ZeRO buckets before 70db7bc (stage 1-2) and 01fd11e (stage 3)

ONE_GPU_CHECK = "bench/history/gpu.md, 'The one-GPU check on a real GPU (issue 22)', 2026-11-26"
THROUGHPUT = "bench/history/gpu.md, 'GPU throughput beside a plain PyTorch loop', 2026-11-27 01:12"
PROBE = "bench/history/gpu.md, 'Why ZeRO-2 stepped at 2x the plain loop', 2026-11-27 04:33-04:50"


def _plan(backend: str, stage: int | None = None, dtype: str = "fp32", micro: int = 1):
    ds = DSConfig(zero_stage=stage) if backend == "deepspeed" else DSConfig()
    cfg = TrainerConfig(dtype=dtype, train_batch_size=64, micro_train_batch_size=micro)
    return TrainerPlan(role="actor", backend=backend, world_size=1, ds=ds, config=cfg)


TORCH_BF16 = _plan("torch", dtype="bf16", micro=16)
ZERO2_BF16 = _plan("deepspeed", 2, dtype="bf16", micro=16)
ZERO1_BF16 = _plan("deepspeed", 1, dtype="bf16", micro=16)
# the benchmarks' plain loop: fp32 weights under bf16 autocast and AdamW, as DeepSpeed's
# stage 0 holds them (no masters; gradients in fp32)
PLAIN = _plan("deepspeed", 0, dtype="bf16", micro=16)


def _held(plan: TrainerPlan, bucket: int | None = None) -> float:
    """What a trainer holds between steps (its gradients freed)."""
    return sum(states.trainer_items("actor", SHAPE, plan, bucket)[0].values())


def _step(plan: TrainerPlan, tokens: int, bucket: int | None = None) -> float:
    """A trainer's own peak in a step of `tokens`-token micro-batches (HF's loss: logits
    for every token)."""
    resident, learn = states.trainer_items("actor", SHAPE, plan, bucket)
    precision = activations.precision_of(states.module_bytes(plan), plan.config.dtype == "bf16")
    acts = activations.learn(SHAPE, tokens=tokens, logit_rows=tokens, precision=precision,
                             checkpointing=False)
    return sum(resident.values()) + sum(learn.values()) + sum(acts.values())


FP32_MODEL = 4 * SHAPE.params  # the benchmark's own copy, moved to the GPU first

# (figure, its source, measured bytes, modelled bytes)
FIGURES = [
    ("trainer sleep: torch held", ONE_GPU_CHECK, 1.894 * GIB, _held(_plan("torch"))),
    ("trainer sleep: ZeRO-2 held", ONE_GPU_CHECK, 2.5 * GIB,
     _held(_plan("deepspeed", 2), HIDDEN2)),
    ("trainer sleep: ZeRO-3 held", ONE_GPU_CHECK, 3.112 * GIB,
     _held(_plan("deepspeed", 3), HIDDEN2)),
    # gpu_throughput.py: the fp32 model, then each side on its own copy in one process,
    # every side stepped once before the measured rounds (so each holds its Adam states)
    ("learn 64x512, micro 16: torch trainer", THROUGHPUT, 17_103 * MIB,
     FP32_MODEL + _held(PLAIN) + _held(ZERO2_BF16, HIDDEN2) + _step(TORCH_BF16, 16 * 512)),
    ("learn 64x512, micro 16: plain loop", THROUGHPUT, 18_923 * MIB,
     FP32_MODEL + _held(TORCH_BF16) + _held(ZERO2_BF16, HIDDEN2) + _step(PLAIN, 16 * 512)),
    ("learn 64x512, micro 16: ZeRO-2", THROUGHPUT, 17_054 * MIB,
     FP32_MODEL + _held(TORCH_BF16) + _held(PLAIN) + _step(ZERO2_BF16, 16 * 512, HIDDEN2)),
    # ds_zero_probe.py's run after the change (the variants with a second figure in its
    # table: zero2 with the new buckets, zero2_hidden2_buckets, zero1), beside the plain
    # loop and the fp32 model; the peak quoted is the new zero2's
    ("probe 64x256, micro 16: ZeRO-2 new buckets", PROBE, 14_324 * MIB,
     FP32_MODEL + _held(PLAIN) + _held(ZERO2_BF16, HIDDEN2) + _held(ZERO1_BF16)
     + _step(ZERO2_BF16, 16 * 256)),
    ("probe 16x2048, micro 4: ZeRO-2 new buckets", PROBE, 19_213 * MIB,
     FP32_MODEL + _held(PLAIN) + _held(ZERO2_BF16, HIDDEN2) + _held(ZERO1_BF16)
     + _step(ZERO2_BF16, 4 * 2048)),
]


def test_the_sleep_checks_model_has_164m_parameters():
    assert SHAPE.params == 163_609_344  # 20 × 6,292,992 + 49,152 × 768 (tied) + 768


@pytest.mark.parametrize("name, source, measured, modelled", FIGURES,
                         ids=[f[0] for f in FIGURES])
def test_the_model_reproduces_the_h100_peaks(name, source, measured, modelled):
    error = modelled / measured - 1
    assert abs(error) <= TOLERANCE, f"{name} ({source}): model {modelled / MIB:,.0f} MiB, " \
        f"measured {measured / MIB:,.0f} MiB ({error:+.1%})"


def errors() -> list[tuple[str, float, float, float]]:
    """(figure, measured MiB, modelled MiB, error): the table docs/DISTRIBUTED.md quotes."""
    return [(n, m / MIB, x / MIB, x / m - 1) for n, _, m, x in FIGURES]
