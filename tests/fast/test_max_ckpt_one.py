"""`--max_ckpt_num 1` is accepted (issue 47, item 7: it was refused, "expected >= 2"), and
the newest committed checkpoint stays safe another way: pruning never leaves fewer than
two on disk, since the newest is committed only when its task ends (a crash while it is
written resumes from the one before); a note says so. OpenRLHF (`--max_ckpt_num`,
`ckpt.max_num` in 0.11, default 3) keeps that many DeepSpeed checkpoints and accepts 1."""

from __future__ import annotations

from alignflow.artifacts.ckpt_index import prune
from alignflow.flows.cli.run_config import check_run


class _Store:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def delete(self, path: str, recursive: bool = False) -> None:
        self.deleted.append(path)


def test_max_ckpt_num_one_is_accepted_and_noted():
    for flow in ("grpo", "sft"):
        checked = check_run(flow, None, [], ["--max_ckpt_num", "1"], check=False)
        assert checked.config.ckpt.max_num == 1
        assert any(n.startswith("ckpt.max_num = 1: the checkpoint before the newest is kept "
                                "too") for n in checked.notes), checked.notes


def test_one_still_keeps_the_last_committed_checkpoint():
    store, saved = _Store(), ["iter-0000", "iter-0001", "iter-0002"]
    prune(store, saved, 1)
    assert saved == ["iter-0001", "iter-0002"] and store.deleted == ["iter-0000"]
