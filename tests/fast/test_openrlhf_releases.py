"""Every script of OpenRLHF's examples/scripts at the last tag of each minor line 0.5 → 0.11
(tests/fixtures/openrlhf_scripts/releases, places swapped for local ones) passes every check
of `alignflow run` (`--dry-run`'s), with the hardware left to this machine
(`--ignore-hardware`), or fails only where OpenRLHF would too or on a feature alignflow
refuses with a reason `rules.MISSING` keeps true."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.compat import reference, rules
from tests.openrlhf_launch import places, release_launches, release_scripts, swapped

SCRIPTS = release_scripts()
# what OpenRLHF's own start-up refuses too (an assert after parsing), by the line alignflow says
OPENRLHF_REFUSES = ("'rollout.n_samples_per_prompt': expected >= 2",)


@pytest.fixture(scope="module")
def where(tmp_path_factory, tiny_model_dir, tiny_rm_dir):
    return places(tmp_path_factory.mktemp("releases"), tiny_model_dir)


def parser_accepts(tag: str, cli: str, name: str) -> bool:
    """Whether OpenRLHF's parser of `cli` at `tag` takes `--name` (whole, or as argparse's
    unambiguous prefix)."""
    at = reference.release(tag)
    here = [n for n, f in reference.of_cli(cli).items() if f.present(at)]
    return name in here or len([n for n in here if n.startswith(name)]) == 1


def why_refused(line: str, tag: str, cli: str) -> str | None:
    """Which allowed kind of refusal `line` is, if any."""
    if line.startswith("unknown flag '--"):
        name = line.split("'")[1][2:].replace("-", "_")
        return None if parser_accepts(tag, cli, name) else "OpenRLHF's parser"
    if any(r in line for r in OPENRLHF_REFUSES):
        return "OpenRLHF's start-up"
    if any(line.endswith(reason) for reason in rules.MISSING.values()):
        return "missing feature"
    if "agent episodes are not generated in segments" in line:
        return "missing feature"
    return None


def test_the_fixture_set_has_every_release():
    tags = {tag for tag, _s, _f in SCRIPTS}
    assert len(tags) == 7 and len(SCRIPTS) >= 170
    assert sum(bool(release_launches(f)) for _t, _s, f in SCRIPTS) >= 135


@pytest.mark.parametrize("tag,script,file", SCRIPTS, ids=[f"{t}/{s}" for t, s, _f in SCRIPTS])
def test_release_script_passes_or_fails_only_where_it_must(tag, script, file, where):
    for launch in release_launches(file):
        try:
            check_run(launch.flow, None, [], swapped(launch, where), ignore_hardware=True)
        except ConfigError as exc:
            lines = [str(p) for p in getattr(exc, "problems", [exc])]
            unexpected = [line for line in lines if why_refused(line, tag, launch.script) is None]
            assert unexpected == [], f"{tag} {script}"
