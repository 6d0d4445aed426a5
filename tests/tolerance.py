"""Float tolerances derived from the arithmetic, not measured on one machine.

Two computations of one quantity (merged weights vs base + adapter, packed vs padded rows,
a batch vs one row at a time, micro-batches vs one batch) differ by rounding only, and by
how much depends on the order a BLAS kernel adds in, which depends on the thread count and
the load. A sum of n terms in a dtype with unit roundoff u lies within γ_n·Σ|terms| of the
exact sum, γ_n = n·u / (1 − n·u) (Higham, Accuracy and Stability of Numerical Algorithms,
§3.1), whatever the order; two such results lie within twice that of each other. So a
tolerance is γ of the reduction length times the size of what is summed — from the dtype,
the model's widths and the magnitudes in the test, the same on every machine.
"""

from __future__ import annotations

from typing import Any

import torch


def unit_roundoff(dtype: torch.dtype = torch.float32) -> float:
    return torch.finfo(dtype).eps / 2


def gamma(n: int, dtype: torch.dtype = torch.float32) -> float:
    """γ_n: the relative error bound of a sum (or dot product) of n terms."""
    nu = n * unit_roundoff(dtype)
    assert nu < 1, f"a reduction of {n} terms is past what γ bounds in {dtype}"
    return nu / (1 - nu)


def sum_bound(n: int, magnitude: float, dtype: torch.dtype = torch.float32) -> float:
    """|a − b| for two sums of the same n terms, each term at most `magnitude` in size,
    added in any two orders."""
    return 2 * gamma(n, dtype) * n * float(magnitude)


def network_bound(config: Any, magnitude: float, dtype: torch.dtype = torch.float32) -> float:
    """|a − b| for one output of a decoder (a logit or log-prob) computed two ways: each
    layer chains four reductions (attention scores, attention output, MLP up, MLP down) over
    at most max(hidden, intermediate) terms, the head one over the hidden size and the
    log-softmax one over the vocabulary; each adds γ relative to the size of the terms
    summed: the larger of `magnitude` (the largest |output| in the test) and 1, the scale
    RMS normalisation gives every layer's input."""
    width = max(config.hidden_size, getattr(config, "intermediate_size", config.hidden_size))
    chained = 4 * config.num_hidden_layers + 1
    vocab = getattr(config, "vocab_size", width)
    return 2 * (chained * gamma(width, dtype) + gamma(vocab, dtype)) * max(1.0, float(magnitude))


def gradient_bound(config: Any, tokens: int, gradient: torch.Tensor,
                   dtype: torch.dtype = torch.float32) -> float:
    """|a − b| for a gradient entry computed with two batchings (micro-batches, packed
    rows): the backward pass chains the forward's reductions once more (`network_bound`'s
    chain, twice), and the entries sum one term per token (γ over `tokens`); relative to the
    gradient's size (its largest entry)."""
    width = max(config.hidden_size, getattr(config, "intermediate_size", config.hidden_size))
    chained = 2 * (4 * config.num_hidden_layers + 1)
    vocab = getattr(config, "vocab_size", width)
    rel = chained * gamma(width, dtype) + gamma(vocab, dtype) + gamma(tokens, dtype)
    return 2 * rel * float(gradient.abs().max())
