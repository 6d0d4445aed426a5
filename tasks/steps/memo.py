"""What every host keeps between tasks besides its models: values built once per key."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any


class Memo:
    """Values a host builds once and keeps between tasks (prepared examples, ptx texts)."""

    def memo(self, key: Hashable, build: Callable[[], Any]) -> Any:
        cache = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = build()
        return cache[key]
