"""Arrow token lists → padded / packed torch tensors, checked against hand-written values."""

from __future__ import annotations

import pyarrow as pa
import torch

from alignflow.artifacts.tensors import pack, pad, pad_left, pad_right

SEQS = [[5, 6, 7], [8], [9, 10]]


def test_pad_right_and_left():
    ids, mask = pad_right(SEQS, 0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0], [9, 10, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    ids, mask = pad_left(pa.array(SEQS, pa.list_(pa.int32())), -1)
    assert ids.tolist() == [[5, 6, 7], [-1, -1, 8], [-1, 9, 10]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1], [0, 1, 1]]
    assert ids.dtype == torch.int64


def test_sliced_and_chunked_columns():
    arr = pa.array([[1, 2], *SEQS], pa.list_(pa.int32()))
    ids, _ = pad(arr.slice(1), 0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0], [9, 10, 0]]
    chunked = pa.chunked_array([arr.slice(0, 2), arr.slice(2)])
    assert pad(chunked, 0, "left")[0].tolist()[0] == [0, 1, 2]


def test_pack():
    input_ids, position_ids, cu = pack(SEQS)
    assert input_ids.tolist() == [[5, 6, 7, 8, 9, 10]]
    assert position_ids.tolist() == [[0, 1, 2, 0, 0, 1]]
    assert cu.tolist() == [0, 3, 4, 6] and cu.dtype == torch.int32
