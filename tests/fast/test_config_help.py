"""`--help-config` describes every key in whole sentences: a docstring entry that wraps
onto indented lines is read whole (five used to stop mid-sentence)."""

from __future__ import annotations

import re

import pytest

from alignflow.flows.campaign.config import CampaignConfig
from alignflow.flows.config.help import config_fields
from alignflow.flows.loader import load_flow
from alignflow.flows.registry import BUILTIN

CONNECTIVES = re.compile(r"\b(with|of|the|a|an|to|and|or|for|in|instead|from|than)$")
INTERVAL = re.compile(r"[\[(][^\[\]()]*[\])]")  # [0, 0.5), (0, 1]: not parentheses


@pytest.mark.parametrize("cls", sorted({load_flow(f)[1] for f in BUILTIN if load_flow(f)[1]}
                                       | {CampaignConfig}, key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_every_key_is_described_in_whole_sentences(cls):
    cut = [(f.path, f.help) for f in config_fields(cls) if f.help and (
        _unbalanced(f.help) or CONNECTIVES.search(f.help.rstrip(" ;,:")))]
    assert cut == []


def test_a_wrapped_entry_is_read_whole():
    found = {f.path: f.help for f in config_fields(load_flow("grpo")[1])}
    assert found["vllm.num_engines"].endswith("a number > 0 also asks for vLLM where it is "
                                              "installed)")


def _unbalanced(text: str) -> bool:
    while INTERVAL.search(text):
        text = INTERVAL.sub("", text)
    return "(" in text or ")" in text
