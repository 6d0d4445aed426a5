"""A campaign's CONFIG checked at start and followed when edited: a gate metric the eval does
not have is refused before anything runs, naming the metrics it has; an edited gate metric,
schedule or retention is followed by the running campaign; what earlier evaluations fixed
(the gate's prompts) is refused naming the key; `inputs.min_files: 0` without data of the
round config's own is refused (it would train on the flow's default data)."""

from __future__ import annotations

import pytest
import yaml

from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError
from alignflow.flows.campaign import control
from alignflow.flows.journal import runs
from tests.campaign.conftest import write_prompts
from tests.campaign.test_campaign_rounds import RID, cli

pytestmark = pytest.mark.slow


def test_an_unknown_gate_metric_is_refused_at_start(campaign_files, tmp_path):
    path, _ = campaign_files
    with pytest.raises(ConfigError) as info:
        cli("tick", path, tmp_path / "store", ["gate.metric=score/correct"])
    assert str(info.value) == (
        "config key 'gate.metric': 'score/correct' is not a metric of the gate's eval; expected "
        "one of response_len_mean, truncated_frac, tokens, reward_mean, reward_std, "
        "score/target, score/target/target, score/target/present")
    assert not (tmp_path / "store").exists()


def test_min_files_zero_needs_the_round_configs_own_data(campaign_files, tmp_path):
    path, _ = campaign_files
    with pytest.raises(ConfigError, match=r"^inputs.min_files: 0 trains a round with no new "
                                          r"file on the round config's own data, but config "
                                          r"names none at 'prompt_data'"):
        cli("tick", path, tmp_path / "store", ["inputs.min_files=0"])


def test_an_edited_config_is_followed_where_the_campaign_can(campaign_files, tmp_path, clock,
                                                             capsys):
    path, _ = campaign_files
    store = Store.open(str(tmp_path / "store"))
    store.write_json(control.control_path(RID), {"paused": True})  # rounds train nothing
    assert cli("tick", path, store.url) == 0  # the gate's evals, round 0 (paused), asleep
    edited = ["gate.metric=score/target/present", "retention.keep_rounds=2",
              "schedule.every=2h"]
    assert cli("tick", path, store.url, edited) == 0  # nothing due: checked and said
    assert "follows the config given now from its next round: gate.metric, " \
        "retention.keep_rounds, schedule.every" in capsys.readouterr().err
    clock.advance(3600)
    assert cli("tick", path, store.url, edited) == 0  # round 1 runs under the edited config
    assert [r["metric"] for r in control.records(store, RID)] == [
        "reward_mean", "score/target/present"]
    stored = runs.read_run(store, RID)["config"]["fields"]
    assert stored["gate"]["fields"]["metric"] == "score/target/present"
    other = write_prompts(tmp_path / "other.jsonl", 0, 8)
    with pytest.raises(ConfigError) as info:
        cli("tick", path, store.url, [*edited, f"gate.prompts={other}"])
    assert "gate.prompts" in str(info.value) and "task 'gate/prompts' used it" in str(info.value)
    assert yaml.safe_load(path.read_text())["gate"]["metric"] == "reward_mean"
