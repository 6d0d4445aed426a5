"""Peak GPU memory of a step, per role, beside the plan's peak for the same GPU: a `metrics`
row and keys in the step's output (which the progress line shows and the catalog's
`memory_peaks` view reads). A host on the CPU measures nothing; its planned peak (a simulated
GPU's) is still recorded, so the view can say why the measured column is empty."""

from __future__ import annotations

import torch

from alignflow.tasks.modeling.device import peak_gib, reset_peak
from alignflow.tasks.steps.metrics import write_metrics

PREFIX = "gpu/"
SUFFIX = "/peak_allocated_gib"
PLANNED = "/planned_peak_gib"
GIB = 1 << 30


def _device(host) -> torch.device:
    return getattr(host, "device", None) or torch.device("cpu")


def _planned(host) -> int | None:
    return getattr(getattr(host, "spec", None), "planned_peak", None)


def start(host) -> None:
    """Call when a step begins on `host`: the peak counts from here."""
    reset_peak(_device(host))


def peak_metrics(host, role: str) -> dict[str, float]:
    """`{"gpu/<role>/peak_allocated_gib": GiB}` since `start` (CUDA only), and
    `gpu/<role>/planned_peak_gib` where the run's plan knows this GPU's peak."""
    found: dict[str, float] = {}
    planned, peak = _planned(host), peak_gib(_device(host))
    if planned is not None:
        found[f"{PREFIX}{role}{PLANNED}"] = planned / GIB
    if peak is not None:
        found[f"{PREFIX}{role}{SUFFIX}"] = peak
    return found


def record(scope, host, role: str, iteration: int) -> dict[str, float]:
    """`peak_metrics`, also written to the `metrics` table at `iteration`."""
    found = peak_metrics(host, role)
    if found:
        write_metrics(scope, [(iteration, found)], partition={"iter": iteration})
    return found
