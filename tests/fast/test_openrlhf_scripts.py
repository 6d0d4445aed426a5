"""Every OpenRLHF launch script of the fixture set, both CLI generations: it translates, and
its command line (places swapped for local ones, see tests/openrlhf_launch.py) passes every
check of `alignflow run` at once — unknown flags, values, models, data columns, reward
files — with the hardware flags turned into notes by --ignore-hardware. No Ray, no store."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.compat import rules
from alignflow.flows.compat.translate import render, translate
from tests.openrlhf_launch import all_scripts, load, places, swapped

SCRIPTS = all_scripts()


@pytest.fixture(scope="module")
def where(tmp_path_factory, tiny_model_dir, tiny_rm_dir):
    return places(tmp_path_factory.mktemp("openrlhf"), tiny_model_dir)


def test_the_fixture_set_covers_both_generations():
    assert len(SCRIPTS) >= 24
    assert sum("_flat" in s for s in SCRIPTS) >= 12 and sum("_dotted" in s for s in SCRIPTS) >= 10


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_translates(script):
    text = render(translate(load(script)))
    assert f"alignflow run {load(script).flow}" in text


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_command_line_passes_every_check(script, where):
    launch = load(script)
    try:
        check_run(launch.flow, None, [], swapped(launch, where), ignore_hardware=True)
    except ConfigError as exc:  # only features alignflow lacks, each with its reason
        lines = [str(p) for p in getattr(exc, "problems", [exc])]
        assert all(any(line.endswith(r) for r in rules.MISSING.values()) for line in lines), \
            lines
