"""Weight buckets (pure torch, no vLLM): runs in the main suite and in `make test-vllm`."""

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.engines.vllm.weights import ALIGN, pack_buckets, unpack


def _tensors():
    g = torch.Generator().manual_seed(0)
    return [
        ("a.weight", torch.randn(7, 3, generator=g)),
        ("b.bias", torch.randn(5, generator=g).to(torch.bfloat16)),
        ("c.scale", torch.tensor(2.5, dtype=torch.float64)),
        ("d.mask", torch.tensor([True, False, True])),
        ("e.weight", torch.randn(64, 64, generator=g)[:, ::2]),  # not contiguous
        ("f.empty", torch.zeros(0, 4)),
    ]


@pytest.mark.parametrize("bucket_bytes", [1, 128, 1 << 20])
def test_round_trip_is_bitwise_in_order(bucket_bytes):
    tensors = _tensors()
    buckets = list(pack_buckets(iter(tensors), bucket_bytes))
    out = [item for b in buckets for item in b.unpack()]
    assert [n for n, _ in out] == [n for n, _ in tensors]
    for (_, got), (_, want) in zip(out, tensors, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
    assert all(o % ALIGN == 0 for b in buckets for o in b.offsets)


def test_bucket_sizes():
    tensors = [(f"t{i}.weight", torch.ones(64)) for i in range(10)]  # 256 bytes each
    buckets = list(pack_buckets(tensors, 1024))
    assert [len(b.names) for b in buckets] == [4, 4, 2]
    assert all(b.buffer.numel() <= 1024 for b in buckets)
    big = list(pack_buckets([("big.weight", torch.ones(1000))], 1024))
    assert len(big) == 1 and big[0].buffer.numel() >= 4000  # a large tensor gets its own


def test_unpacked_tensors_are_views_of_the_buffer():
    bucket = next(pack_buckets(_tensors(), 1 << 20))
    name, view = unpack(*bucket.as_args())[0]
    bucket.buffer.zero_()
    assert name == "a.weight" and torch.count_nonzero(view) == 0


def test_bad_bucket_size_names_the_setting():
    with pytest.raises(ConfigError, match="bucket_bytes=0"):
        list(pack_buckets(_tensors(), 0))
