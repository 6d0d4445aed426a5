"""The extractor of documented commands (`tests/doc_commands.py`, shared with the README
run-line test): it finds the commands of code spans, code blocks, comments, crontabs and
YAML manifests, and reads usage notation as a reader would."""

from __future__ import annotations

from tests.doc_commands import _expand, _words, commands, readme_runs


def test_usage_notation_is_read_as_a_reader_would():
    assert _words("alignflow resume RUN_ID [--rerun-from iter-0003/learn]") == ["resume", "RUN_ID"]
    assert _words("alignflow run grpo --pretrain ... --n 2") == ["run", "grpo", "--n", "2"]
    assert _words("alignflow gc [--delete]   # orphans") == ["gc"]
    assert _words("alignflow tick >> /var/log/x 2>&1") == ["tick"]
    assert _expand(["campaign", "start|tick", "CONFIG"]) == [
        ("campaign", "start", "CONFIG"), ("campaign", "tick", "CONFIG")]


def test_commands_of_every_kind_of_source_are_found():
    found = {(c.where.split(":")[0], c.argv) for c in commands()}
    assert ("infra/campaign/crontab", ("campaign", "tick", "infra/campaign/campaign.yaml")) in found
    assert ("README.md", ("sql", "SELECT iteration, avg(reward) FROM rollouts GROUP BY 1 "
                                 "ORDER BY 1")) in found
    assert ("docs/DISTRIBUTED.md", ("export", "RUN", "--out", "DIR", "--merge-lora")) in found
    entry = [a for w, a in found if w == "infra/kuberay/rayjob.yaml" and "--pretrain" in a]
    assert entry and entry[0][:3] == ("run", "grpo", "--address")  # the folded entrypoint
    assert ("examples/dpo_champ_smollm2.yaml",
            ("run", "dpo", "--config", "examples/dpo_champ_smollm2.yaml")) in found
    assert not any("as" in a[:2] for _, a in found)  # "an alignflow run as a RayJob" is prose


def test_readme_run_lines():
    runs = readme_runs()
    assert len(runs) >= 8 and all(r[0] == "run" for r in runs)
    assert ["run", "path/to/my_flow.py:my_flow"] in runs
