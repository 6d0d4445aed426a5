"""The Ray executor on a GPU node: a host actor with `num_gpus=1`, or four sharing one GPU.

`whole`: GRPO as tests/gpu runs it, but with `executor="ray"`: the host is a Ray actor
given one GPU, and finds it through Ray's CUDA_VISIBLE_DEVICES. `quarter`: PPO with every
role on its own host (actor, ref, critic, reward; `train.colocate_all=false`) at
`placement.num_gpus=0.25`: four actors on one GPU. The runs use tests/gpu's own settings
and helpers; the GPU peak-memory metrics of the trained roles show they ran on cuda.
"""

from __future__ import annotations

import shutil
import time

from bench.gpu_check.checks.common import CheckFailed, cuda, out_dir, run, tiny_model_dir

MODES = {
    "whole": ("grpo", {"rollout.engine": "hf"}, ("actor",)),
    "quarter": ("ppo", {"rollout.engine": "hf", "train.colocate_all": "false",
                        "placement.num_gpus": "0.25", "algo.advantage.estimator": "gae",
                        "algo.kl.init_coef": "0.01"}, ("actor", "critic")),
}


def check(argv: list[str]) -> dict:
    cuda()
    tiny_model_dir()
    from alignflow.artifacts.metric_names import canonical
    from alignflow.tasks.steps.gpu_memory import PREFIX, SUFFIX
    from tests.gpu.test_gpu_flows import _metrics, _run, _sets

    mode = argv[0] if argv else "whole"
    flow, extra, trained = MODES[mode]
    store = out_dir() / f"store-ray-{mode}"
    shutil.rmtree(store, ignore_errors=True)
    start = time.perf_counter()
    _run(flow, _sets(**extra), store, mode, executor="ray")
    seconds = time.perf_counter() - start
    peaks = {k: max(v) for k, v in _metrics(store, mode, canonical(PREFIX)).items()}
    missing = [r for r in trained if canonical(f"{PREFIX}{r}{SUFFIX}") not in peaks]
    figures = {"flow": flow, "sets": extra, "seconds": round(seconds, 1), "gpu_peaks": peaks,
               "summary": f"{flow} on Ray ({mode}) in {seconds:.0f} s; peaks "
                          + ", ".join(f"{k.removesuffix(SUFFIX).rsplit('/', 1)[-1]} {v:.2f} GiB"
                                    for k, v in peaks.items())}
    if missing:
        raise CheckFailed(f"no GPU peak memory recorded for {missing}: those roles did not "
                          "run on cuda", figures)
    return figures


if __name__ == "__main__":
    run(check)
