"""Data-parallel statistics on the GPU group: `tasks/distributed/reduce.py` as a 2-rank
group calls it, on the group the code forms on GPUs (`group.default_backend()`: NCCL for
CUDA tensors, gloo for the CPU statistics, issue 21 §3.1).

NCCL refuses two ranks on one device, so the process joins a real group of one and the
module's rank count is patched to 2: every function then takes its all-reduce path. Before
the fix the group was NCCL-only and `global_sum` / `global_shares` failed ("No backend type
associated with device type cpu"). Each function is tried on its own; the figures say which
work, and which backend the group had.
"""

from __future__ import annotations

from bench.gpu_check.checks.common import CheckFailed, cuda, run, traceback_tail


def _probes(torch, reduce) -> dict:
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], device="cuda")
    mask = torch.tensor([1, 1, 1, 0], device="cuda")
    return {
        "all_reduce_sum_cuda": lambda: reduce.all_reduce_sum(x).tolist(),
        "global_sum": lambda: reduce.global_sum(3.0),
        "global_count": lambda: reduce.global_count(mask),
        "global_shares": lambda: reduce.global_shares({"loss": 1.5, "tokens": 10.0,
                                                       "grad_norm": 2.0}),
        "global_masked_moments": lambda: [float(v) for v in
                                          reduce.global_masked_moments(x, mask)],
    }


def check(argv: list[str]) -> dict:
    torch = cuda()
    from alignflow.tasks.distributed import group, reduce

    torch.cuda.set_device(0)
    backend = group.default_backend()
    group.join(group.GroupSpec(rank=0, world_size=1, master_addr="127.0.0.1",
                               master_port=group.free_port(), backend=backend, timeout_s=60))
    reduce.rank_and_size = lambda: (0, 2)  # the module's own name: its reduce paths run
    results, first_error = {}, None
    try:
        for name, probe in _probes(torch, reduce).items():
            try:
                results[name] = {"ok": True, "value": probe()}
            except Exception as exc:  # each probe's failure is a finding
                results[name] = {"ok": False, "error": str(exc).splitlines()[0][:200]}
                first_error = first_error or exc
    finally:
        group.leave()
    broken = [k for k, v in results.items() if not v["ok"]]
    figures = {"probes": results, "world": 1, "patched_world": 2, "backend": backend,
               "summary": f"{len(results) - len(broken)}/{len(results)} work"
                          + (f"; failing: {', '.join(broken)}" if broken else "")}
    if first_error is not None:
        raise CheckFailed(f"{len(broken)} reduce function(s) fail on NCCL: "
                          f"{traceback_tail(first_error, 1)[0]}", figures) from first_error
    return figures


if __name__ == "__main__":
    run(check)
