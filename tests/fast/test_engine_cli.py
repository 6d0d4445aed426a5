"""`alignflow run/resume/status/ls/logs/cancel/delete`: results and one-line errors."""

from __future__ import annotations

import pytest

from alignflow.cli import main

FLOWS = "tests/flows_for_tests.py"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_STORE", str(tmp_path / "store"))
    (tmp_path / "counts").mkdir()
    return tmp_path


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, *argv) -> str:
    code, _out, err = cli(capsys, *argv)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_run_status_ls_logs_cancel_delete(env, capsys):
    counts = str(env / "counts")
    code, out, _ = cli(capsys, "run", f"{FLOWS}:steps", "--set", f"dir={counts}", "--set", "n=2",
                       "--executor", "inline", "--run-id", "r1", "--seed", "3")
    assert code == 0
    assert out.strip().endswith('"fields":{"step":1,"value":1.5}}]')
    code, out, _ = cli(capsys, "status")
    lines = out.splitlines()
    assert lines[0].startswith("r1  flow=steps  status=SUCCESSFUL  seed=3")
    assert [ln.split()[:3] for ln in lines[2:]] == [["step-0", "SUCCESSFUL", "1"],
                                                   ["step-1", "SUCCESSFUL", "1"]]
    code, out, _ = cli(capsys, "ls")
    assert out.splitlines()[1].split()[:3] == ["r1", "steps", "SUCCESSFUL"]
    assert out.splitlines()[1].split()[-1] == "2"
    code, out, _ = cli(capsys, "cancel", "r1")
    assert (code, out) == (0, "r1: CANCELED\n")
    code, out, _ = cli(capsys, "delete", "r1")
    assert (code, out) == (0, "r1: deleted\n")
    assert one_line_error(capsys, "status", "r1").startswith("error: no run 'r1'")


def test_logs_show_captured_task_output(env, capsys, tmp_path):
    flow = tmp_path / "loud.py"
    flow.write_text("from alignflow.flows.engine import flow, task\n"
                    "@task\ndef hello(x):\n    print('hello', x)\n    return x\n"
                    "@flow\ndef loud(cfg):\n    return [hello(1), hello(2)]\n")
    assert cli(capsys, "run", f"{flow}:loud", "--executor", "inline", "--run-id", "L")[0] == 0
    code, out, _ = cli(capsys, "logs", "L", "hello-1")
    assert out == "--- attempt 1 ---\nhello 2\n"
    code, out, _ = cli(capsys, "logs", "L")
    assert out.count("=== hello-") == 2


def test_bad_input_errors_are_one_line_with_exit_code_2(env, capsys, tmp_path):
    err = one_line_error(capsys, "run", "nosuchflow")
    assert "unknown flow 'nosuchflow'" in err and "path/to/file.py:function" in err
    err = one_line_error(capsys, "run", f"{FLOWS}:typed", "--set", "nope=1", "--executor",
                         "inline")
    assert err == "error: unknown config key 'nope' in --set"
    err = one_line_error(capsys, "run", f"{FLOWS}:typed", "--set", "n=abc", "--executor",
                         "inline")
    assert err == "error: config key 'n' = 'abc' (from --set n): expected int"
    err = one_line_error(capsys, "run", f"{FLOWS}:typed", "--bogus", "3")
    assert err == "error: unknown flag '--bogus'"
    err = one_line_error(capsys, "run", f"{FLOWS}:steps", "--config", str(tmp_path / "no.yaml"))
    assert "no.yaml" in err and "not found" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("n: [1, 2\n")
    assert "malformed YAML" in one_line_error(capsys, "run", f"{FLOWS}:steps", "--config",
                                              str(bad))
    assert "no run 'ghost'" in one_line_error(capsys, "resume", "ghost")
    assert "missing.py" in one_line_error(capsys, "run", "missing.py:f")
    counts = str(env / "counts")
    assert cli(capsys, "run", f"{FLOWS}:steps", "--set", f"dir={counts}", "--set", "n=1",
               "--executor", "inline", "--run-id", "ok")[0] == 0
    assert "already SUCCESSFUL" in one_line_error(capsys, "resume", "ok")
    assert "already exists" in one_line_error(capsys, "run", f"{FLOWS}:steps", "--run-id", "ok",
                                              "--executor", "inline")


def test_typed_config_flags_reach_the_flow(env, capsys):
    counts = str(env / "counts")
    code, out, _ = cli(capsys, "run", f"{FLOWS}:typed", "--set", f"dir={counts}", "--n", "3",
                       "--executor", "inline", "--run-id", "t")
    assert code == 0
    assert out.count('"__type__"') == 3


def test_builtin_names_resume_all_and_tick(env, capsys, monkeypatch):
    from alignflow.artifacts.store import Store
    from alignflow.flows import registry
    from alignflow.flows.journal import runs

    monkeypatch.setitem(registry.BUILTIN, "steps-demo", ("tests.flows_for_tests:steps", None))
    counts = str(env / "counts")
    assert "steps-demo" in one_line_error(capsys, "run", "nosuchflow")
    code, _out, _ = cli(capsys, "run", "steps-demo", "--set", f"dir={counts}", "--set", "n=2",
                        "--executor", "inline", "--run-id", "b")
    assert code == 0
    store = Store.open(str(env / "store"))
    assert runs.read_run(store, "b")["flow_ref"] == "steps-demo"
    store.delete(runs.manifest_path("b", "step-1"))
    runs.update_run(store, "b", status=runs.RUNNING)
    assert cli(capsys, "resume", "--all")[1] == "b: SUCCESSFUL\n"
    assert cli(capsys, "tick")[1] == ""  # nothing due
    assert "give RUN_ID or --all" in one_line_error(capsys, "resume")


@pytest.mark.parametrize("bad", ["a/b", ".hidden", "..", "it's", 'q"', "a b", "", "x" * 129])
def test_bad_run_ids_are_refused_before_anything_is_written(capsys, tmp_path, bad):
    store = tmp_path / "store"
    err = one_line_error(capsys, "run", f"{FLOWS}:steps", "--run-id", bad, "--store",
                         str(store), "--executor", "inline")
    assert err.startswith(f"error: run id {bad!r}: expected 1-128 characters")
    assert not store.exists()


@pytest.mark.parametrize("argv", [["--debug", "resume", "ghost"], ["resume", "ghost", "--debug"]])
def test_debug_before_or_after_the_command_shows_the_traceback(env, argv):
    from alignflow.errors import RunNotFound

    with pytest.raises(RunNotFound):  # raised, not turned into one line
        main(argv)


def test_ls_and_status_of_a_store_that_is_not_there_fail(capsys, tmp_path):
    err = one_line_error(capsys, "ls", "--store", str(tmp_path / "typo"))
    assert err == (f"error: no store at {tmp_path / 'typo'}: the path does not exist; expected a "
                   "store written by alignflow (--store URL or $ALIGNFLOW_STORE)")
    assert "no store at" in one_line_error(capsys, "status", "r", "--store", str(tmp_path / "x"))


def test_status_of_an_interrupted_run_says_how_to_continue(env, capsys, monkeypatch):
    from alignflow.flows.control import api
    from alignflow.flows.journal import runs
    from tests import flows_for_tests as F

    def interrupt(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(F.step, "fn", interrupt)
    with pytest.raises(KeyboardInterrupt):
        api.run(F.steps, {"dir": "/nonexistent", "n": 1}, run_id="r", executor="inline")
    code, out, _err = cli(capsys, "status", "r")
    assert code == 0 and f"status={runs.RESUMABLE}" in out
    assert "stopped, not failed (driver interrupted); continue with `alignflow resume r`" in out
    assert "error:" not in out


def test_a_campaign_says_to_tick_it_again_not_to_resume_its_run():
    import io

    from alignflow.flows.cli.progress import Progress

    progress = Progress(stream=io.StringIO(), live=False, resume="alignflow campaign tick c.yaml")
    progress.start_run("campaign-c", "campaign")
    assert progress.summary("RESUMABLE").endswith("continue with `alignflow campaign tick c.yaml`")
