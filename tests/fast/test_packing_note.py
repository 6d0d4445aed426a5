"""`--packing_samples` in DPO, RM and PRM, which alignflow does not pack, is said at start
and in `--dry-run` (issue 47, item 5). OpenRLHF packs them (train_dpo/train_rm/train_prm
take `--packing_samples` into their datasets' packing collate); alignflow packs SFT's and
CSFT's micro-batches only (`tasks/offline/kinds.py`), so those get no note."""

from __future__ import annotations

import pytest

from alignflow.flows.cli.run_config import check_run


def _packing_notes(flow: str) -> list[str]:
    checked = check_run(flow, None, [], ["--packing_samples"], check=False)
    return [n for n in checked.notes if "packing_samples" in n]


@pytest.mark.parametrize("flow", ["dpo", "rm", "prm"])
def test_packing_samples_is_noted_where_not_applied(flow):
    assert _packing_notes(flow) == [
        f"ds.packing_samples is not applied in {flow}: only sft and csft pack micro-batches "
        f"here (OpenRLHF packs {flow}'s too); its micro-batches are padded, with the same loss"]


@pytest.mark.parametrize("flow", ["sft", "csft"])
def test_no_note_where_it_packs(flow):
    assert _packing_notes(flow) == []
