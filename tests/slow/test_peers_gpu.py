"""`bench/peers_gpu.py` in its CPU mode at the tiny size (issue 46): every kind runs on
each side there is (TRL where the `bench` extra is installed) and reports tokens/s and
peak memory, with the tokens each side trains counted once from the data. Figures are not
judged here; on a GPU the node check `trl_peers` runs it at ~1B."""

from __future__ import annotations

import importlib.util

import pytest

from bench.peer_setup import tiny
from bench.peers_gpu import SIZES, main

pytestmark = pytest.mark.slow


def test_cpu_mode_runs_every_kind_and_reports_the_same_tokens_on_each_side():
    sides = ["alignflow", *(["trl"] if importlib.util.find_spec("trl") else [])]
    rows = main(["--size", "tiny", "--cpu", "--sides", ",".join(sides)])
    assert [(r["kind"], r["side"]) for r in rows] == [
        (k, s) for k in ("sft", "dpo", "grpo") for s in sides]
    work = tiny()
    by = {(r["kind"], r["side"]): r for r in rows}
    for r in rows:
        assert r["tokens_per_s"] > 0 and r["peak_mib"] > 0 and r["device"] == "cpu"
        assert "mfu" not in r  # no device peak to divide by on a CPU
        assert r["train"] == by[r["kind"], "alignflow"]["train"]  # one count for both sides
    assert by["dpo", "alignflow"]["ref"] == by["dpo", "alignflow"]["train"]  # a reference pass
    assert by["sft", "alignflow"]["ref"] == by["grpo", "alignflow"]["ref"] == 0
    assert by["grpo", "alignflow"]["generated"] == work.prompts * work.samples * work.new_tokens
    shape = SIZES["tiny"]  # 2 blocks of width 64, a 512-id vocabulary, untied head
    block = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * shape["intermediate_size"] + 2 * 64
    assert rows[0]["params"] == 2 * block + 2 * 512 * 64 + 64


@pytest.mark.skipif(importlib.util.find_spec("trl") is not None, reason="TRL is installed")
def test_the_node_check_fails_in_one_line_without_trl():
    from bench.gpu_check.checks.common import CheckFailed
    from bench.gpu_check.checks.trl_peers import check

    with pytest.raises(CheckFailed, match="TRL is not importable: the bundle carries it"):
        check(["cpu"])
