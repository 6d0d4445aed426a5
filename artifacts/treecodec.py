"""Encode nested Python state (optimizer, scheduler, RNG) as JSON plus a dict of tensors.

No pickle: tensors and numpy arrays go to a safetensors file under generated keys and the
JSON holds markers; tuples and dicts with non-string keys are marked so they come back
with their exact types (torch's AdamW reads `betas` as a tuple, `state` keys as ints).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from alignflow.errors import SchemaError


def encode(obj: Any, tensors: dict[str, torch.Tensor], prefix: str) -> Any:
    """JSON-ready form of `obj`; tensors are moved into `tensors` under `prefix/...` keys."""
    if isinstance(obj, torch.Tensor):
        tensors[prefix] = obj.detach().cpu().contiguous()
        return {"__tensor__": prefix}
    if isinstance(obj, np.ndarray):
        tensors[prefix] = torch.from_numpy(obj.astype(np.int64) if obj.dtype == np.uint32
                                           else np.ascontiguousarray(obj))
        return {"__ndarray__": prefix, "dtype": str(obj.dtype)}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(v, tensors, f"{prefix}/{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [encode(v, tensors, f"{prefix}/{i}") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: encode(v, tensors, f"{prefix}/{k}") for k, v in obj.items()}
        return {"__items__": [[encode(k, tensors, f"{prefix}/k{i}"),
                               encode(v, tensors, f"{prefix}/{i}")]
                              for i, (k, v) in enumerate(obj.items())]}
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise SchemaError(f"{prefix}: cannot store a {type(obj).__name__} without pickle; "
                      "expected tensors, numbers, strings, lists, tuples or dicts")


def decode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """Inverse of `encode`."""
    if isinstance(obj, list):
        return [decode(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        return tensors[obj["__tensor__"]]
    if "__ndarray__" in obj:
        return tensors[obj["__ndarray__"]].numpy().astype(obj["dtype"])
    if "__tuple__" in obj:
        return tuple(decode(v, tensors) for v in obj["__tuple__"])
    if "__items__" in obj:
        return {_hashable(decode(k, tensors)): decode(v, tensors) for k, v in obj["__items__"]}
    return {k: decode(v, tensors) for k, v in obj.items()}


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
