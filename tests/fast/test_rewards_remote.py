"""Remote reward model client against a real HTTP server on 127.0.0.1 (http.server thread)."""

import contextlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.rewards.remote import RemoteRewardModel, RewardServerError

QUERIES = ["p a", "p bb", "p ccc", "p dddd", "p eeeee"]
PROMPTS = ["p "] * 5
LABELS = ["1", None, "3", "4", "5"]


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def _send(self, code: int, body: bytes, length: bool = True) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client cut it off
            self.wfile.write(body)

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(payload)
        n = len(payload["query"])
        rewards = [float(len(q)) for q in payload["query"]]
        route = self.path.strip("/")
        if route == "flaky" and len(self.server.requests) <= 2:
            return self._send(500, b"busy")
        if route == "slow":
            time.sleep(1.0)
        bodies = {
            "ok": {"rewards": rewards, "scores": {"len": rewards},
                   "extra_logs": {"ones": [1] * n}},
            "batchlog": {"rewards": rewards, "extra_logs": {"acc": sum(rewards) / n}},
            "flaky": {"rewards": rewards}, "slow": {"rewards": rewards},
            "list": rewards, "short": {"rewards": rewards[:-1]},
            "missing": {"reward": rewards}, "text": {"rewards": ["high"] * n},
        }
        if route == "nonjson":
            return self._send(200, b"<html>Internal</html>")
        if route in ("big", "big-nolength"):
            return self._send(200, b"[" + b"1.0," * 100_000 + b"1.0]", route == "big")
        if route == "bad-request":
            return self._send(400, b"{}")
        self._send(200, json.dumps(bodies[route]).encode())


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _client(url, **kw):
    kw.setdefault("backoff", 0.01)
    return RemoteRewardModel(url=url, **kw)


def test_normal_reply_and_wire_format(server):
    httpd, base = server
    out = _client(base + "/ok").score(QUERIES, PROMPTS, LABELS)
    assert out.rewards.tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert out.rewards.dtype == torch.float32
    assert out.scores["len"].tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert out.extra_logs["ones"].tolist() == [1.0] * 5
    assert httpd.requests == [{"query": QUERIES, "prompts": PROMPTS, "labels": LABELS}]


def test_micro_batches(server):
    httpd, base = server
    out = _client(base + "/ok", micro_batch=2).score(QUERIES, PROMPTS, LABELS)
    assert out.rewards.tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert out.extra_logs["ones"].tolist() == [1.0] * 5
    assert [len(r["query"]) for r in httpd.requests] == [2, 2, 1]
    assert httpd.requests[1]["labels"] == ["3", "4"]


def test_plain_list_reply(server):
    _, base = server
    assert _client(base + "/list").score(QUERIES, PROMPTS, LABELS).rewards.tolist() == [
        3.0, 4.0, 5.0, 6.0, 7.0]


def test_retries_5xx_then_ok(server):
    httpd, base = server
    out = _client(base + "/flaky", retries=3).score(QUERIES, PROMPTS, LABELS)
    assert out.rewards.tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert len(httpd.requests) == 3  # two 500s, then the answer


def test_5xx_exhausts_retries(server):
    httpd, base = server
    with pytest.raises(RewardServerError, match=rf"reward server {base}/flaky failed 2 times "
                                                r"within 300 s \(no try left; last: HTTP 500"):
        _client(base + "/flaky", retries=1).score(QUERIES, PROMPTS, LABELS)
    assert len(httpd.requests) == 2


def test_timeout(server):
    httpd, base = server
    start = time.monotonic()
    with pytest.raises(RewardServerError, match=rf"reward server {base}/slow failed 2 times "
                                                r"within 300 s \(no try left; last: .*timed out"):
        _client(base + "/slow", timeout=0.2, retries=1).score(QUERIES, PROMPTS, LABELS)
    assert time.monotonic() - start < 1.5
    assert len(httpd.requests) == 2


def test_connection_refused():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the request: nobody listens
    with pytest.raises(RewardServerError, match=rf"127.0.0.1:{port}/x failed 3 times"):
        _client(f"http://127.0.0.1:{port}/x", retries=2).score(QUERIES, PROMPTS, LABELS)


def test_a_hanging_server_costs_one_budget_per_batch_then_a_clear_failure(server):
    """Many tries and a long per-request timeout, but the batch's budget (0.5 s) caps it:
    no request outlives it, and the engine does not retry on top (kind user)."""
    httpd, base = server
    start = time.monotonic()
    with pytest.raises(RewardServerError, match=r"failed 1 times within 0.5 s \(the batch's "
                                                r"time budget ran out; last: .*timed out") as info:
        _client(base + "/slow", timeout=60, retries=9, budget=0.5, micro_batch=2).score(
            QUERIES, PROMPTS, LABELS)
    assert time.monotonic() - start < 0.9
    assert info.value.kind == "user"
    assert len(httpd.requests) == 1  # the first micro-batch used the whole budget


def test_the_budget_is_a_checked_config_key():
    from alignflow.tasks.rewards.registry import RewardConfig, build_source

    assert build_source("http://127.0.0.1:1/x", RewardConfig(sources=("x",),
                                                             remote_budget=7.0)).budget == 7.0
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="remote_budget"):
            RewardConfig(sources=("x",), remote_budget=bad)


@pytest.mark.parametrize(("route", "kw", "message"), [
    ("nonjson", {}, r"replied with non-JSON \('<html>Internal</html>'\)"),
    ("big", {"max_bytes": 4096}, "sent a reply over 4096 bytes"),
    ("big-nolength", {"max_bytes": 4096}, "sent a reply over 4096 bytes"),
    ("short", {}, "returned 4 rewards for 5 queries; expected 5"),
    ("missing", {}, r"reply has no 'rewards' key \(keys: \['reward'\]\)"),
    ("text", {}, "returned non-numeric rewards"),
    ("bad-request", {}, "answered HTTP 400"),
])
def test_bad_replies_are_one_line_naming_url(server, route, kw, message):
    httpd, base = server
    with pytest.raises(ConfigError, match=message) as info:
        _client(f"{base}/{route}", **kw).score(QUERIES, PROMPTS, LABELS)
    text = str(info.value)
    assert f"{base}/{route}" in text and "\n" not in text
    assert len(httpd.requests) == 1  # a bad reply is not retried


def test_bad_url_refused():
    with pytest.raises(ConfigError, match="'ftp://x' is not an http"):
        RemoteRewardModel(url="ftp://x")


def test_a_batch_number_in_extra_logs_is_a_batch_metric(server):
    _, base = server
    out = _client(base + "/batchlog", micro_batch=2).score(QUERIES, PROMPTS, LABELS)
    assert out.extra_logs == {}
    # parts [3, 4], [5, 6], [7] -> means 3.5, 5.5, 7 weighted 2, 2, 1 -> 5.0 overall
    assert out.batch_logs == {"acc": pytest.approx(5.0)}


def test_several_urls_are_replicas_of_one_reward(server):
    from alignflow.tasks.rewards.registry import RewardConfig, build_reward

    httpd, base = server
    cfg = RewardConfig(remote_url=f"{base}/ok,{base}/ok")
    assert cfg.specs == (f"remote={base}/ok,{base}/ok",)
    reward = build_reward(cfg)
    out = reward.score(QUERIES, PROMPTS, LABELS)
    assert out.rewards.tolist() == [3.0, 4.0, 5.0, 6.0, 7.0]  # not summed: one reward
    assert sorted(len(r["query"]) for r in httpd.requests) == [2, 3]  # one shard each
    assert RewardConfig(remote_url="r.py,http://x/y").specs == ("r.py",)  # a .py first wins
