"""`alignflow translate` reads a launch script's words as the shell does and lists every
problem at once; `--detach` and `campaign` keep what their commands need (issue 47, items
14 and 19).

The expectation, bash (and so OpenRLHF's launch scripts as their authors run them): `$(...)`
and `${...}` are one word however many spaces they hold; `> log`, `2>&1` are redirections,
not arguments; a pipe ends the command. OpenRLHF's argparse never sees any of them.
"""

from __future__ import annotations

import argparse

from alignflow.cli import build_parser
from alignflow.flows.cli import detach
from alignflow.flows.compat.script import read_launch, shell_words
from alignflow.flows.compat.translate import render, translate

SCRIPT = """
ray job submit -- python3 -m openrlhf.cli.train_ppo_ray \\
   --pretrain m --advantage_estimator group_norm --n_samples_per_prompt 4 \\
   --temperature hot --eps_clip x \\
   --save_path /ckpt/run-$(date +%Y%m%d-%H%M) --actor_learning_rate 1e-6 > log.txt 2>&1 | tee y
"""


def test_substitutions_stay_whole_and_redirections_are_left_out():
    words, dropped = shell_words('cd d && openrlhf.cli.train_sft --t "<|im_end|> > x" '
                                 '--p $(date +%Y %m) ${X:-a b} 2>&1 >> l | tee b')
    assert words == ["openrlhf.cli.train_sft", "--t", "<|im_end|> > x", "--p",
                     "$(date +%Y %m)", "${X:-a b}"]
    assert dropped == ["2>&1", ">> l"]
    assert shell_words("--n 2 > log")[0] == ["--n", "2"]


def test_translate_lists_every_problem_and_keeps_the_rest():
    launch = read_launch(SCRIPT, env={})
    assert "--save_path" in launch.flags and "/ckpt/run-$(date +%Y%m%d-%H%M)" in launch.flags
    text = render(translate(launch))
    assert "# dropped --temperature hot: config key 'rollout.temperature'" in text
    assert "# dropped --eps_clip x: config key 'actor.eps_clip'" in text
    assert "# note: `> log.txt` is a shell redirection" in text and "`2>&1`" in text
    command = text.split("\n\n")[0]
    assert "--temperature" not in command.split("#")[-1] and "'>'" not in command
    assert '--save_path "/ckpt/run-$(date +%Y%m%d-%H%M)"' in command


def test_the_detach_hint_names_the_store(tmp_path, monkeypatch, capsys):
    class Child:
        pid, returncode = 7, None

        def poll(self):
            return None

    monkeypatch.setattr(detach, "log_dir", lambda: tmp_path)
    monkeypatch.setattr(detach.subprocess, "Popen", lambda *a, **k: Child())
    args = argparse.Namespace(run_id="r1", flow="grpo", executor="inline", seed=None,
                              config=None, store=str(tmp_path / "s"), address=None, sets=[],
                              supervise=False)
    store = argparse.Namespace(exists=lambda _path: True)
    assert detach.detach(args, [], None, store) == "r1"
    assert f"`alignflow status r1 --store {tmp_path / 's'}`" in capsys.readouterr().err


def test_campaign_takes_trust_as_documented():
    args = build_parser("campaign").parse_args(["campaign", "tick", "c.yaml", "--trust", "f.py",
                                                "--trust", "d/"])
    assert args.trust == ["f.py", "d/"]
