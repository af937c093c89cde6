# SPDX-License-Identifier: Apache-2.0
# fsdpsim.layout: the reference's layout_builder API (/work/shared/docs/seeds: Megatron-FSDP v2's
# published layout_builder page) over core/layout/layout_builder.h, checked against the page's
# worked example and against `fsdpsim layout --format json`.
import pytest

from fsdpsim import layout
from conftest import run_cli

# The published page's example: chunk 12, five equal rank segments, P3 fills P1's tail gap.
SHAPES = [(2, 6), (4, 4), (4, 4), (1, 2), (1, 6)]


def test_row_atomic_is_the_reference_example():
    lay = layout.build_for_row_atomic(SHAPES, 5)
    assert lay.rank_to_offset == [0, 12, 24, 36, 48]
    assert lay.size == 60
    assert lay.tensor_to_offset == [0, 12, 32, 28, 48]
    assert lay.get_tensor_range(3) == (28, 2)
    assert [lay.rank_size(k) for k in range(5)] == [12] * 5
    assert lay.tensor_shapes == SHAPES


BLOCK_SHAPES = [(2, 6), (4, 4), (4, 4), (2, 2), (2, 6)]  # every dim 0 a multiple of 2


@pytest.mark.parametrize("shapes,placement,kwargs,cli", [
    (SHAPES, "padded", dict(block_size=1), dict(dp=5)),
    (BLOCK_SHAPES, "padded", dict(block_size=2), dict(dp=3, block=2, placement="block")),
    (SHAPES, "unpadded", dict(block_size=1), dict(dp=4, shard_layout="unpadded")),
    (SHAPES, "tensor", dict(), dict(dp=2, placement="tensor", owners="0,1,0,1,1")),
])
def test_builders_match_the_cli(fsdpsim_exe, shapes, placement, kwargs, cli):
    text = ",".join("x".join(str(d) for d in s) for s in shapes)
    expected = run_cli(fsdpsim_exe, "layout", dict(cli, shapes=text, format="json"))
    if placement == "tensor":
        lay = layout.build_for_tensor_atomic(shapes, cli["dp"], [0, 1, 0, 1, 1])
    else:
        lay = layout.build_row_atomic_layout(shapes, cli["dp"], shard_layout=placement,
                                             **kwargs)
    assert lay.tensor_to_offset == expected["tensor_offsets"]
    assert lay.rank_to_offset == expected["rank_offsets"]
    assert lay.size == expected["size"]


@pytest.mark.parametrize("call,message", [
    (lambda: layout.build_for_row_atomic(SHAPES, 0), "dp size must be positive"),
    (lambda: layout.build_for_row_atomic([(2, -1)], 2), r"shapes\[0\]: shape dim 1 is -1"),
    (lambda: layout.build_row_atomic_layout(SHAPES, 2, shard_layout="x"), "shard layout 'x'"),
    (lambda: layout.build_for_tensor_atomic(SHAPES, 2, [0, 1]), "tensor owners must match"),
])
def test_builder_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
