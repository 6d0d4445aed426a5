"""Peak GPU memory of a step, per role: a `metrics` row and a key in the step's output
(which the progress line shows). Nothing is recorded for hosts on the CPU."""

from __future__ import annotations

import torch

from alignflow.tasks.modeling.device import peak_gib, reset_peak
from alignflow.tasks.steps.metrics import write_metrics

PREFIX = "gpu/"
SUFFIX = "/peak_allocated_gib"


def _device(host) -> torch.device:
    return getattr(host, "device", None) or torch.device("cpu")


def start(host) -> None:
    """Call when a step begins on `host`: the peak counts from here."""
    reset_peak(_device(host))


def peak_metrics(host, role: str) -> dict[str, float]:
    """`{"gpu/<role>/peak_allocated_gib": GiB}` since `start`, or {} on the CPU."""
    peak = peak_gib(_device(host))
    return {} if peak is None else {f"{PREFIX}{role}{SUFFIX}": peak}


def record(scope, host, role: str, iteration: int) -> dict[str, float]:
    """`peak_metrics`, also written to the `metrics` table at `iteration`."""
    found = peak_metrics(host, role)
    if found:
        write_metrics(scope, [(iteration, found)], partition={"iter": iteration})
    return found
