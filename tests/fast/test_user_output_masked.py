"""What user code prints through alignflow shows no secret: a reward function (in its child
process), an agent's environment (on its own thread), a remote reward server's error reply;
on the terminal and in the task's log alike (issue 40 §5)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from alignflow.artifacts.masked_output import LineMasker
from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError
from alignflow.flows import wrapper
from alignflow.tasks.agents.loader import load_agent_executor
from alignflow.tasks.rewards.remote import RemoteRewardModel
from tests.fast.test_agents import _agent, _episodes

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {"HF_TOKEN": "hf_Zq8WcV2xYp4LmN6bR1tK9sD3fG7hJ5aQeU",
           "HUGGING_FACE_HUB_TOKEN": "hub-7f3e9a1c5b2d8e4f6a0b",
           "WANDB_API_KEY": "wandb-0a1b2c3d4e5f6a7b8c9d0e1f",
           "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
           "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjEXAMPLESESSION",
           "DATABASE_URL": "postgres://app:Pg-s3cret-99@db.internal:5432/runs"}
REGISTERED = "reg-value-5e6f7a8b"  # a value only `register_secret` knows of
SHOWN = [*SECRETS.values(), "Pg-s3cret-99", REGISTERED]

REWARD_FILE = '''
import os, sys
from urllib.parse import urlparse

def reward_func(queries, prompts, labels):
    values = [os.environ[n] for n in %r]
    values += [urlparse(os.environ["DATABASE_URL"]).password, %r]
    for value in values:
        print("stdout", value)
        print("stderr", value, file=sys.stderr)
        sys.stdout.write(value[:5])  # one secret, two writes
        sys.stdout.write(value[5:] + "\\n")
        os.write(2, ("fd 2 " + value + "\\n").encode())  # past sys.stderr
    print("unfinished", values[0], end="")
    return [1.0] * len(queries)
'''

CHILD = r'''
import sys
from pathlib import Path
from alignflow.artifacts import usercode
from alignflow.artifacts.redact import register_secret
from alignflow.artifacts.store import Store
from alignflow.flows import wrapper
from alignflow.tasks.rewards.python_func import PythonRewardFunc

def body(path):
    return PythonRewardFunc(path).score(["q a"], ["q "], [None]).rewards.tolist()

if __name__ == "__main__":
    folder, secret = Path(sys.argv[1]), sys.argv[2]
    register_secret("MY_REGISTERED", secret)
    usercode.grant(usercode.for_files(folder / "reward.py"))
    call = {"store": Store(str(folder / "store")), "run_id": "r", "task_key": "score",
            "seed": 1, "attempt": 1, "fn": body, "args": (folder / "reward.py",),
            "kwargs": {}}
    print("result", wrapper.execute(call)["output"], file=sys.stderr)
'''


def _clean(text: str) -> None:
    leaked = [value for value in SHOWN if value in text]
    assert not leaked, f"shown unmasked: {leaked}"


def test_a_reward_function_prints_no_credential(tmp_path):
    (tmp_path / "reward.py").write_text(REWARD_FILE % (sorted(SECRETS), REGISTERED))
    env = {**os.environ, **SECRETS, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), REGISTERED],
                          capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert "result" in done.stderr and "Error" not in done.stderr, done.stderr
    _clean(done.stdout)
    _clean(done.stderr)
    log = (tmp_path / "store" / "runs" / "r" / "logs" / "score.log").read_text()
    _clean(log)  # the task's log holds what its reward function printed, masked
    assert done.stdout.count("<redacted $DATABASE_URL>") == 4  # the URL whole and alone
    for name in [*SECRETS, "MY_REGISTERED"]:
        assert f"stdout <redacted ${name}>" in done.stdout
        assert f"stderr <redacted ${name}>" in done.stderr
        assert f"fd 2 <redacted ${name}>" in done.stderr
        assert f"stdout <redacted ${name}>" in log and f"fd 2 <redacted ${name}>" in log
    assert "unfinished <redacted $AWS_SECRET_ACCESS_KEY>" in done.stdout


def test_an_agent_prints_no_credential(tmp_path, monkeypatch, capsys):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    step = ("        import os, sys\n"
            "        for name in ('WANDB_API_KEY', 'AWS_SESSION_TOKEN', 'HF_TOKEN'):\n"
            "            value = os.environ[name]\n"
            "            sys.stdout.write(value[:4]); sys.stdout.write(value[4:] + '\\n')\n"
            "            print('env', value, file=sys.stderr)\n"
            "        print('last', value, end='')\n"
            "        return {'rewards': 1.0, 'environment_feedback': 'ok', 'done': True}")
    executor = load_agent_executor(_agent(tmp_path, step))
    call = {"store": Store(str(tmp_path / "store")), "run_id": "r", "task_key": "rollout",
            "seed": 1, "attempt": 1, "fn": lambda: len(_episodes(executor, ["7"],
                                                                  [("3+4=", "7")])[0]),
            "args": (), "kwargs": {}}
    assert wrapper.execute(call)["error"] is None
    shown = capsys.readouterr()
    log = (tmp_path / "store" / "runs" / "r" / "logs" / "rollout.log").read_text()
    for text in (shown.out, shown.err, log):
        _clean(text)
    assert "<redacted $WANDB_API_KEY>\n" in shown.out and "last <redacted $HF_TOKEN>" in log
    assert "env <redacted $AWS_SESSION_TOKEN>" in shown.err


class _Echo(BaseHTTPRequestHandler):
    """A reward server that quotes back the token it refuses."""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = f"invalid token {os.environ['HF_TOKEN']}".encode()
        self.send_response(401 if self.path == "/unauthorized" else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("route", ["unauthorized", "not-json"])
def test_a_remote_reward_error_quotes_no_credential(monkeypatch, route):
    monkeypatch.setenv("HF_TOKEN", "hf_EchoedBackByTheServer1234567890ab")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/{route}"
    with pytest.raises(ConfigError) as info:
        RemoteRewardModel(url=url, retries=0).score(["p a"], ["p "], [None])
    httpd.shutdown()
    httpd.server_close()
    assert "hf_EchoedBackByTheServer" not in str(info.value)
    assert "<redacted $HF_TOKEN>" in str(info.value)


def test_lines_are_masked_whole_and_the_unfinished_one_at_the_end(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "wandb-0a1b2c3d4e5f")
    masker = LineMasker()
    shown = [masker.feed(piece) for piece in ("key wandb-0a1", "b2c3d4e5f\nnext ", "wandb-0a")]
    shown += [masker.feed("1b2c3d4e5f\rbar "), masker.feed("wandb-0a1b2c3d4e5f"), masker.finish()]
    assert shown == ["", "key <redacted $WANDB_API_KEY>\n", "",
                     "next <redacted $WANDB_API_KEY>\r", "", "bar <redacted $WANDB_API_KEY>"]
