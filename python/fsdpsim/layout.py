# SPDX-License-Identifier: Apache-2.0
"""The DBuffer layout builders (core/layout/layout_builder.h) with the reference's names and
arguments: Megatron-FSDP v2's layout_builder (docs/user-guide.md, "From Python").

Shapes are sequences of ints in tensor-id order; each builder returns a GlobalLayout with the
reference's fields. Errors (a bad shape, dp_size, block_size or owner) raise ValueError.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Sequence, Tuple

from . import _core

__all__ = ["GlobalLayout", "build_row_atomic_layout", "build_for_row_atomic",
           "build_for_row_atomic_unpadding", "build_for_tensor_atomic"]


@dataclass(frozen=True)
class GlobalLayout:
    """Global element offsets of every tensor and the start of every rank's segment."""

    tensor_shapes: List[Tuple[int, ...]]
    tensor_to_offset: List[int]
    rank_to_offset: List[int]
    size: int

    @property
    def dp_size(self) -> int:
        return len(self.rank_to_offset)

    def get_tensor_range(self, i: int) -> Tuple[int, int]:
        """(offset, numel) of tensor i."""
        numel = 1
        for d in self.tensor_shapes[i]:
            numel *= d
        return self.tensor_to_offset[i], numel

    def rank_size(self, k: int) -> int:
        """Elements of rank k's segment."""
        end = self.rank_to_offset[k + 1] if k + 1 < self.dp_size else self.size
        return end - self.rank_to_offset[k]


def _dims(shapes: Iterable[Sequence[int]]) -> List[List[int]]:
    return [list(s) for s in shapes]


def build_row_atomic_layout(shapes: Iterable[Sequence[int]], dp_size: int, *,
                            block_size: int = 1, shard_layout: str) -> GlobalLayout:
    """RowAtomic/BlockAtomic with the builder shard_layout selects: "padded" or "unpadded"."""
    return GlobalLayout(**_core.build_row_atomic_layout(_dims(shapes), dp_size, block_size,
                                                        shard_layout))


def build_for_row_atomic(shapes: Iterable[Sequence[int]], dp_size: int, *,
                         block_size: int = 1) -> GlobalLayout:
    """Equal-size rank segments, each a multiple of the chunk (the LCM of the row sizes)."""
    return GlobalLayout(**_core.build_for_row_atomic(_dims(shapes), dp_size, block_size))


def build_for_row_atomic_unpadding(shapes: Iterable[Sequence[int]], dp_size: int, *,
                                   block_size: int = 1) -> GlobalLayout:
    """Padding-free, generally unequal rank segments on row/block boundaries."""
    return GlobalLayout(**_core.build_for_row_atomic_unpadding(_dims(shapes), dp_size,
                                                               block_size))


def build_for_tensor_atomic(shapes: Iterable[Sequence[int]], dp_size: int,
                            tensor_owners: Sequence[int]) -> GlobalLayout:
    """Each tensor wholly on its owner rank; ranks packed in owner order."""
    return GlobalLayout(**_core.build_for_tensor_atomic(_dims(shapes), dp_size,
                                                        list(tensor_owners)))
