"""The report's header of a resumed run and its comparison of runs whose lines coincide
(issue 47, item 16). A resumed run's driven time counts only the drives that ended well (a
killed one records none), so its header gives first start to last end, says so, and says
how many drives it took; a comparison draws coinciding lines so each stays visible, and
says they coincide."""

from __future__ import annotations

import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.catalog.report import render_report
from alignflow.catalog.report.compare import render_comparison
from alignflow.catalog.report.data import Series
from alignflow.catalog.report.plots import coinciding, line_styles
from tests.fast.test_catalog_report import T0, _rl_iteration, _run_json


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, str]:
    from alignflow.artifacts.store import Store

    store = Store.open(str(tmp_path_factory.mktemp("drives") / "store"))
    # killed twice (kill -9: no time recorded), the last drive ran 67 s; 4m41s in all
    _run_json(store, "resumed", "grpo", ended=T0 + 281.0, active=67.0, drivers=3)
    _run_json(store, "once", "grpo", drivers=1)
    _run_json(store, "twin", "grpo", drivers=1)
    for it in range(3):
        _rl_iteration(store, "resumed", it, 0.1)
        _rl_iteration(store, "once", it, 0.2)
        _rl_iteration(store, "twin", it, 0.2)  # the same rewards as `once`
    with Catalog(store) as cat:
        return {"resumed": render_report(cat, "resumed"), "once": render_report(cat, "once"),
                "twins": render_comparison(cat, ["once", "twin", "resumed"])}


def test_a_resumed_run_shows_its_whole_duration_and_its_drives(pages):
    page = pages["resumed"]
    assert "4m 41s, first start to last end, the time it sat interrupted included " \
           "(driven time recorded: 1m 07s)" in page
    assert "3: interrupted and resumed 2 times" in page


def test_a_run_driven_once_says_so(pages):
    page = pages["once"]
    assert "2m 05s" in page and "first start to last end" not in page
    assert "1 (never interrupted)" in page


def test_coinciding_lines_are_said_and_drawn_apart(pages):
    assert "lines that coincide (drawn dashed, markers on alternate points): reward " \
           "(once = twin)" in pages["twins"]


def test_line_styles_of_coinciding_runs_differ():
    a = Series("r", x=[0, 1, 2], mean=[0.1, 0.2, 0.3])
    same = Series("r", x=[0, 1, 2], mean=[0.1, 0.2, 0.30000001])
    other = Series("r", x=[0, 1, 2], mean=[0.1, 0.25, 0.3])
    assert coinciding([a, other, same, None]) == [[0, 2]]
    styles = line_styles([a, other, same, None])
    assert styles[0]["linestyle"] != styles[2]["linestyle"]
    assert styles[0]["marker"] != styles[2]["marker"]
    assert styles[0]["markevery"] == (0, 2) and styles[2]["markevery"] == (1, 2)
    assert styles[1] == {"linestyle": "-", "marker": "o"}  # a line of its own: as before


def test_the_keys_the_user_set_are_marked_first(tmp_path):
    from alignflow.artifacts.store import Store

    store = Store.open(str(tmp_path / "store"))
    _run_json(store, "mine", "grpo", given={"algo.eps_clip": "--set algo.eps_clip",
                                            "async_.max_staleness": "config file 'r.yaml'"})
    _run_json(store, "old", "grpo")  # a run from before `given` was recorded
    with Catalog(store) as cat:
        page, old = render_report(cat, "mine"), render_report(cat, "old")
    assert "2 of 6 keys set by the run&#39;s command or config file (●, first)" in page
    config = page[page.index("<h2>Config</h2>"):]
    assert config.index("algo.eps_clip") < config.index("async.max_staleness") \
        < config.index("algo.kl.init_kl_coef")  # the user's two first
    assert "● --set algo.eps_clip" in config and "● config file &#39;r.yaml&#39;" in config
    assert "which were set by hand is not recorded for this run" in old


def test_a_run_records_the_keys_given_on_its_command_line(local_store, tmp_path, monkeypatch):
    import json

    from alignflow.flows.cli import outputs
    from alignflow.flows.control import api
    from tests.flows_for_tests import steps

    origins = {"a.b": "--set a.b", "c": "config file 'x.yaml'", "d": "--flag_d (alias of d)",
               "train.loss_normalizer": "OpenRLHF v0.10.1.post2's flags (...)"}
    given = outputs.given_keys(origins)
    assert given == {k: origins[k] for k in ("a.b", "c", "d")}  # not what a release moved
    api.run(steps, {"dir": str(tmp_path), "n": 1}, store=local_store, executor="inline",
            run_id="g", given=given)
    assert json.loads(local_store.read_bytes("runs/g/run.json"))["given"] == given
    with Catalog(local_store) as cat:
        row = cat.sql("SELECT given->>'c' AS c FROM runs WHERE run_id = 'g'").to_pylist()[0]
    assert row["c"] == "config file 'x.yaml'"
