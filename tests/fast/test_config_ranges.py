"""Every numeric config key of every built-in flow has a range (issue 9 §3): a float key
refuses nan and inf, an int key refuses a large negative number, each with a one-line
error naming the key."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import config_fields, load_config
from alignflow.flows.loader import load_flow
from alignflow.flows.registry import BUILTIN

# int keys where any integer means something (a seed)
ANY_INT = {"data.seed"}
REQUIRED = {"distill": ["teacher.model_name_or_path=t"],  # what a flow cannot load without
            "on_policy_distill": ["teacher.model_name_or_path=t"],
            "campaign": ["name=c", "flow=grpo", "schedule.every=6h"]}


def _numeric_keys() -> list[tuple[str, str, str]]:
    found = set()
    for flow in sorted(BUILTIN):
        _, cls = load_flow(flow)
        for f in config_fields(cls):
            kind = f.type.replace(" | None", "")
            if kind in ("int", "float"):
                found.add((flow, f.path, kind))
    return sorted(found)


@pytest.mark.parametrize(("flow", "key", "kind"), _numeric_keys())
def test_numeric_key_has_a_range(flow, key, kind):
    _, cls = load_flow(flow)
    bad = ["nan", "inf", "-inf"] if kind == "float" else ([] if key in ANY_INT else ["-1000000"])
    for value in bad:
        with pytest.raises(ConfigError) as info:
            load_config(cls, sets=[*REQUIRED.get(flow, []), f"{key}={value}"])
        assert f"'{key}'" in str(info.value) and "\n" not in str(info.value), str(info.value)
