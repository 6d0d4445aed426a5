"""The host interface (`tasks/steps/host_api.py`) is what the five host classes provide:
each has every member of the parts its table row names (checked without building a
model: attributes are looked up statically)."""

from __future__ import annotations

import inspect
from typing import Protocol

import pytest

from alignflow.flows.campaign.config import GateConfig
from alignflow.flows.campaign.evaluation import EvalHost
from alignflow.tasks.offline.host import OfflineHost, OfflineHostSpec, TeacherHost
from alignflow.tasks.plan.hosts import HostPlan
from alignflow.tasks.rl.rollout_host import RolloutHost, RolloutSpec
from alignflow.tasks.steps import host_api as api
from alignflow.tasks.steps.host import HostSpec, ModelHost


def _members(protocol: type) -> set[str]:
    found: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (object, Protocol) or not getattr(cls, "_is_protocol", False):
            continue
        found |= {n for n in vars(cls) if not n.startswith("_")}
        found |= set(getattr(cls, "__annotations__", {}))
    return found


HOSTS = {
    "ModelHost": (lambda: ModelHost(HostSpec(plan=HostPlan(name="models",
                                                             roles=("actor", "reward")),
                                             pretrain="x")),
                  (api.Host, api.Generator, api.Scorer, api.Trained, api.Synced, api.RLHost)),
    "OfflineHost": (lambda: OfflineHost(OfflineHostSpec(plan=HostPlan(name="policy",
                                                                      roles=("model",)),
                                                        pretrain="x", value_head=False)),
                    (api.Host, api.Trained)),
    "RolloutHost": (lambda: RolloutHost(RolloutSpec(plan=HostPlan(name="rollout", roles=()),
                                                    pretrain="x")),
                    (api.Host, api.Sampler)),
    "TeacherHost": (lambda: TeacherHost("x"), (api.Host, api.Teacher)),
    "EvalHost": (lambda: EvalHost("x", GateConfig()), (api.Generator, api.Scorer)),
}


@pytest.mark.parametrize("name", sorted(HOSTS))
def test_each_host_provides_its_parts(name):
    make, parts = HOSTS[name]
    host = make()
    for part in parts:
        missing = [m for m in sorted(_members(part)) if not _has(host, m)]
        assert not missing, f"{name} lacks {part.__name__}'s {missing}"


def _has(obj: object, name: str) -> bool:
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True
