"""The attention kernels a config may name, apart from the device code (`device.py`), so
config checks and plans import no torch."""

from __future__ import annotations

from typing import Literal

Attention = Literal["sdpa", "eager", "flash_attention_2"]
ATTENTIONS: tuple[str, ...] = ("sdpa", "eager", "flash_attention_2")
