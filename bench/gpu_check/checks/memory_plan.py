"""The memory plan against measured peaks (issue 42, "Checked against reality" (3)).

A random-init Llama of TinyLlama-1.1B's shape (`memory_planned.MODEL`, bf16 weights with
fp32 masters, AdamW) is trained by the trainer a host builds (`trainers.build.load_trainer`:
PyTorch, ZeRO-2, ZeRO-3 partitioned at load), and under ZeRO-3 once more beside a reference
model held as OpenRLHF holds it then: a ZeRO-3 DeepSpeed engine without optimizer
(alignflow's own reference is a replica; one rank's shard is the whole model). Per phase
— `forward` (the reference's log-probs), `learn` (one step of two micro-batches after a
warm-up step, so AdamW's states exist), `sync` (`state_dict_for_sync` streamed) — torch's
`max_memory_allocated`, reset before each phase, less what was allocated before the
trainer was built, is set beside `memory_planned.planned` (the memory model's bytes for the
phase). The loss is alignflow's `sequence_logprobs` over every token, as an actor's is.
Fails when a setting's peak is off by more than 15%, or a setting could not run; without
DeepSpeed the ZeRO settings are skipped and say why. `cpu` as argument rehearses it all on
a tiny shape on the CPU (the same code; nothing to measure there).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import time

from bench.gpu_check.checks import memory_planned as mp
from bench.gpu_check.checks.common import CheckFailed, cuda, run

RUNS = ((mp.SETTINGS[0],), (mp.SETTINGS[1],), (mp.SETTINGS[2], mp.SETTINGS[3]))
NO_DEEPSPEED = ("DeepSpeed is not installed in this environment (it reaches the node only "
                "in the bundle: bench/gpu_bundle)")


class Meter:
    """Peak bytes torch's CUDA allocator held in a phase, above what was allocated before
    the setting's models were built (`start`). The CPU has no such count: None."""

    def __init__(self, torch, device) -> None:
        self.torch, self.on_cuda, self.floor = torch, device.type == "cuda", 0

    def start(self) -> None:
        gc.collect()
        if self.on_cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()
            self.floor = self.torch.cuda.memory_allocated()

    def peak(self, phase) -> int | None:
        if not self.on_cuda:
            phase()
            return None
        cuda_ = self.torch.cuda
        cuda_.synchronize()
        cuda_.reset_peak_memory_stats()
        phase()
        cuda_.synchronize()
        return cuda_.max_memory_allocated() - self.floor


def _loader(torch, model: dict, device):
    """Builds the random Llama: on `device`, or partitioned as it is made under ZeRO-3's
    `zero.Init` (transformers' `from_config` enters it; no weights are initialised then)."""
    from transformers import AutoModelForCausalLM, LlamaConfig
    from transformers.integrations import is_deepspeed_zero3_enabled

    def load():
        config = LlamaConfig(**model)
        if is_deepspeed_zero3_enabled():
            return AutoModelForCausalLM.from_config(config, dtype=torch.float32,
                                                    attn_implementation="sdpa")
        with torch.device(device):
            torch.manual_seed(0)
            return AutoModelForCausalLM.from_config(config, dtype=torch.float32,
                                                    attn_implementation="sdpa")
    return load


def _trainer(torch, setting: mp.Setting, model: dict, rows: int, device):
    from alignflow.tasks.trainers.build import load_trainer

    return load_trainer(_loader(torch, model, device), mp.trainer_config(rows),
                        mp.ds_config(setting), device)


def _reference(torch, model: dict, rows: int, device):
    """A frozen reference as a ZeRO-3 DeepSpeed engine without optimizer (OpenRLHF's eval
    engine at the actor's stage 3), loaded partitioned and configured as alignflow's
    trainers configure DeepSpeed."""
    from alignflow.tasks.trainers.build import deepspeed_overrides, zero3_loading
    from alignflow.tasks.trainers.deepspeed.config import ds_config, import_deepspeed
    from alignflow.tasks.trainers.deepspeed.trainer import param_counts

    cfg, ds = mp.trainer_config(rows), mp.ds_config(mp.SETTINGS[-1])
    with zero3_loading(cfg, ds):
        ref = _loader(torch, model, device)()
    ref.requires_grad_(False)
    config = ds_config(cfg, ds, pin_memory=False, overrides=deepspeed_overrides(ds),
                       **param_counts(ref))
    engine, *_ = import_deepspeed().initialize(model=ref, config=config)
    return engine.eval()


def _loss(model, batch):
    from alignflow.tasks.modeling.logprobs import sequence_logprobs

    ids = batch["input_ids"]
    logprobs = sequence_logprobs(model, ids, batch["attention_mask"], ids.shape[1] - 1)
    return -logprobs.mean(), {}


def _batches(torch, vocab: int, rows: int, seq: int, device) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, vocab, (rows * mp.MICRO_BATCHES, seq), generator=g).to(device)
    return [{"input_ids": c, "attention_mask": torch.ones_like(c)} for c in ids.split(rows)]


def _phases(torch, meter: Meter, trainer, batches, ref=None) -> dict[str, int | None]:
    """The measured phases of one setting (the reference's forward where there is one)."""
    from alignflow.tasks.modeling.logprobs import sequence_logprobs

    def forward():
        with torch.no_grad():
            for b in batches:
                ids = b["input_ids"]
                sequence_logprobs(ref, ids, b["attention_mask"], ids.shape[1] - 1)

    def sync():
        for _name, _tensor in trainer.state_dict_for_sync():  # streamed: nothing kept
            pass
    out = {"forward": meter.peak(forward)} if ref is not None else {}
    out["learn"] = meter.peak(lambda: trainer.step(batches, _loss))
    out["sync"] = meter.peak(sync)
    return out


def _run(torch, settings: tuple, model: dict, rows: int, seq: int, device) -> dict:
    """One trainer built and measured; a second setting of the run adds the reference."""
    meter, out, held = Meter(torch, device), {}, []
    meter.start()
    try:
        trainer = _trainer(torch, settings[0], model, rows, device)
        held.append(trainer)
        batches = _batches(torch, model["vocab_size"], rows, seq, device)
        trainer.step(batches, _loss)  # warm-up: AdamW's states exist from here on
        out[settings[0].name] = _phases(torch, meter, trainer, batches)
        for setting in settings[1:]:
            held.append(_reference(torch, model, rows, device))
            out[setting.name] = _phases(torch, meter, trainer, batches, held[-1])
    except Exception as exc:  # the other settings still run; this one says what broke
        out |= {s.name: f"{type(exc).__name__}: {str(exc)[:300]}" for s in settings
                if s.name not in out}
    finally:
        for engine in [getattr(h, "engine", h) for h in held]:
            with contextlib.suppress(Exception):  # DeepSpeed's hooks and buffers let go
                engine.destroy()
        held.clear()
        gc.collect()
    return out


def deepspeed_found() -> bool:
    return importlib.util.find_spec("deepspeed") is not None


def measure(torch, device, model: dict, rows: int, seq: int, runs: tuple = RUNS) -> dict:
    """Every setting of `runs` measured and planned; the rows the summary prints."""
    deepspeed = deepspeed_found()
    settings, seconds = {}, {}
    for settings_of_run in runs:
        name = settings_of_run[0].name
        if settings_of_run[0].stage is not None and not deepspeed:
            settings |= {s.name: {"skipped": NO_DEEPSPEED} for s in settings_of_run}
            continue
        start = time.perf_counter()
        found = _run(torch, settings_of_run, model, rows, seq, device)
        seconds[name] = round(time.perf_counter() - start, 2)
        for s in settings_of_run:
            got = found[s.name]
            settings[s.name] = {"failed": got} if isinstance(got, str) else \
                mp.compare(s, got, mp.planned(s, model, rows, seq))
    return {"settings": settings, "seconds": seconds,
            "rows": [mp.row(n, f) for n, f in settings.items()]}


def verdict(figures: dict) -> dict:
    """`figures` with their summary; CheckFailed where a setting did not run or its peak is
    off the plan by more than the tolerance."""
    settings = figures["settings"]
    failed = [n for n, f in settings.items() if "failed" in f]
    off = [f"{n} {f['error']:+.1%}" for n, f in settings.items()
           if f.get("error") is not None and abs(f["error"]) > mp.TOLERANCE]
    figures["summary"] = _summary(settings)
    if failed:
        raise CheckFailed(f"settings that did not run: {failed}", figures)
    if off:
        raise CheckFailed(f"the memory model is off by more than {mp.TOLERANCE:.0%}: {off}",
                          figures)
    return figures


def _summary(settings: dict) -> str:
    errors = [f"{n} {f['error']:+.1%}" for n, f in settings.items() if f.get("error") is not None]
    ran = [n for n, f in settings.items() if "phases" in f]
    skipped = [n for n, f in settings.items() if "skipped" in f]
    text = "peak error: " + ", ".join(errors) if errors else \
        "no CUDA allocator: ran " + (", ".join(ran) or "nothing")
    return text + (f"; skipped {', '.join(skipped)}" if skipped else "")


def check(argv: list[str]) -> dict:
    if argv[:1] == ["cpu"]:
        import torch

        figures = {"device": "cpu", "model": mp.CPU_MODEL,
                   **measure(torch, torch.device("cpu"), mp.CPU_MODEL, mp.CPU_ROWS, mp.CPU_SEQ)}
        return verdict(figures)
    torch = cuda()
    device = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(device)
    figures = {"device": props.name, "gpu_memory_gib": round(props.total_memory / mp.GIB, 1),
               "model": mp.MODEL, "micro_batch": f"{mp.ROWS} x {mp.SEQ} tokens",
               **measure(torch, device, mp.MODEL, mp.ROWS, mp.SEQ)}
    print("\n".join(figures["rows"]), flush=True)
    return verdict(figures)


if __name__ == "__main__":
    run(check)
