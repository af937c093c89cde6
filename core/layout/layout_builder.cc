// SPDX-License-Identifier: Apache-2.0
// The PADDED builder reproduces the reference's quadratic first-fit algorithm (spec §2.2) exactly,
// with a bucketed segment tree (conjugates) and a successor set (gap fill) instead of rescans;
// docs/design/layouts.md §3 gives the argument.
#include "core/layout/layout_builder.h"

#include "core/base/check.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/layout/internal/radix_sort.h"
#include "core/layout/internal/row_alignment.h"
#include "core/layout/internal/successor_set.h"
#include "core/layout/layout_validation.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fsdp {

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
// k * size and b * dp reach 2^126: exact comparisons need 128 bits (GCC and Clang builtin).
__extension__ typedef __int128 I128;
// RankId is an int32: a layout for more ranks cannot be addressed (and would not fit in memory).
constexpr std::int64_t kMaxDpSize = std::numeric_limits<std::int32_t>::max();

Error out_of_range(std::string message) {
  return Error(ErrorCode::kOutOfRange, std::move(message));
}

Status check_dp_size(std::int64_t dp_size) {
  if (dp_size <= 0) {
    return Error(ErrorCode::kInvalidArgument, str_cat("dp size must be positive, got ", dp_size));
  }
  if (dp_size > kMaxDpSize) {
    return out_of_range(
        str_cat("dp size must be at most ", kMaxDpSize, " (int32 ranks), got ", dp_size));
  }
  return ok_status();
}

// §2.2 step 1 and the per-tensor loop of step 2 (dp, block, shapes in id order); then the chunk.
// The alignments are not kept: after these checks each is block_size * row_size without overflow.
struct RowAtomicInputs {
  std::int64_t chunk = 1;
};

Expected<RowAtomicInputs> check_row_atomic_inputs(std::span<const Shape> shapes,
                                                  std::int64_t dp_size, std::int64_t block_size) {
  FSDP_RETURN_IF_ERROR(check_dp_size(dp_size));
  if (block_size <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("block size must be positive, got ", block_size));
  }
  RowAtomicInputs in;
  internal::ChunkAccumulator chunk_of;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    FSDP_TRY(const std::int64_t a,
             internal::checked_row_alignment(static_cast<std::int64_t>(i), shapes[i], block_size));
    chunk_of.add(static_cast<std::int64_t>(i), shapes[i], a);
  }
  // The reference's lcm cannot overflow (Python ints), so every shape error above takes precedence
  // over an lcm overflow here.
  FSDP_TRY(in.chunk, chunk_of.result());
  return in;
}

constexpr std::size_t kNone = static_cast<std::size_t>(-1);
static_assert(internal::SuccessorSet::kNone == kNone);

// Leftmost index whose value is <= a threshold, over a fixed array of values that only ever become
// kInactive (T's maximum; every active value and every threshold must be below it). The values sit
// in buckets of one cache line and a min segment tree holds the bucket minima, so a query descends
// a tree 16 times smaller than one with a leaf per value (it stays in L2 at a million tensors) and
// then scans one bucket. T is uint32 when the chunk allows.
template <typename T>
class BucketMinTree {
 public:
  static constexpr T kInactive = std::numeric_limits<T>::max();
  static constexpr std::size_t kBucket = 64 / sizeof(T);

  explicit BucketMinTree(std::size_t n) : value_((n + kBucket - 1) / kBucket * kBucket, kInactive) {
    while (base_ < value_.size() / kBucket) {
      base_ *= 2;
    }
    node_.assign(2 * base_, kInactive);
  }
  // Sets a value; build() then computes the minima.
  void init(std::size_t i, std::int64_t value) { value_[i] = static_cast<T>(value); }
  // Recomputes every bucket minimum and inner node in O(n).
  void build() {
    for (std::size_t b = 0; b * kBucket < value_.size(); ++b) {
      node_[base_ + b] = bucket_min(b);
    }
    for (std::size_t v = base_ - 1; v >= 1; --v) {
      node_[v] = std::min(node_[2 * v], node_[2 * v + 1]);
    }
  }
  void deactivate(std::size_t i) {
    value_[i] = kInactive;
    std::size_t v = base_ + i / kBucket;
    node_[v] = bucket_min(i / kBucket);
    for (v /= 2; v >= 1; v /= 2) {
      const T m = std::min(node_[2 * v], node_[2 * v + 1]);
      if (node_[v] == m) {
        break;
      }
      node_[v] = m;
    }
  }
  // Leftmost index with value <= threshold, or kNone.
  std::size_t leftmost_at_most(std::int64_t threshold) const {
    if (static_cast<std::int64_t>(node_[1]) > threshold) {
      return kNone;
    }
    std::size_t v = 1;
    while (v < base_) {
      v = static_cast<std::int64_t>(node_[2 * v]) <= threshold ? 2 * v : 2 * v + 1;
    }
    std::size_t i = (v - base_) * kBucket;  // the bucket's minimum is <= threshold
    while (static_cast<std::int64_t>(value_[i]) > threshold) {
      ++i;
    }
    return i;
  }

 private:
  T bucket_min(std::size_t b) const {
    const auto first = value_.begin() + static_cast<std::ptrdiff_t>(b * kBucket);
    return *std::min_element(first, first + kBucket);
  }

  std::size_t base_ = 1;
  std::vector<T> value_;
  std::vector<T> node_;
};

Error overflow_error(std::string_view what) {
  return out_of_range(str_cat("padded layout overflows int64 while ", what,
                              "; expected a total size of at most ", kInt64Max, " elements"));
}

// What padded_offsets produces: the offsets by id, the numels by id, the non-empty tensors'
// ids in order of offset (GlobalLayout's fast overlap check; empty when n >= 2^32), and the end
// of the last placement ("next" after the tail).
struct PaddedPlacement {
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> numel_of;
  std::vector<std::uint32_t> start_order;
  std::int64_t end = 0;
};

// A regular in id order: what the pops and the conjugate search read about it, in 16 bytes.
template <typename Idx>
struct RegularRecord {
  std::int64_t numel = 0;
  Idx id = 0;
  bool used = false;  // popped or taken as a conjugate
};

// The fragment at position p of the global order: everything the gap fill reads about it, in one
// record (16 bytes when Idx and Val are uint32), so a visit costs one cache miss, not four.
template <typename Idx, typename Val>
struct FragmentRecord {
  Val numel = 0;
  Val align = 0;
  Idx id = 0;
  Idx next = 0;  // the next position of its class, or the maximum of Idx
};

// A fragment in id order, before the sort: its id and alignment.
template <typename Idx, typename Val>
struct FragmentIdAlign {
  Idx id = 0;
  Val align = 0;
};

// Row size without a call for the 1- and 2-D shapes that dominate parameter groups.
std::int64_t fast_row_size(const Shape& shape) {
  if (shape.ndim() == 1) {
    return 1;
  }
  return shape.ndim() == 2 ? shape.dim(1) : shape.row_size();
}

// The PADDED offsets of §2.2 (inputs already checked, so every alignment block_size * row_size
// fits int64). Idx holds a tensor id or fragment position, and its maximum means "none": uint32
// when n < 2^32 - 1, which halves the index arrays. Val holds fragments' numels and alignments
// and the regulars' remainders mod the chunk: uint32 when chunk < 2^32 - 1. The data structures
// and why they give the reference's result: docs/design/layouts.md §3.2-3.4.
template <typename Idx, typename Val>
Expected<PaddedPlacement> padded_offsets_impl(std::span<const Shape> shapes,
                                              std::int64_t block_size, std::int64_t chunk) {
  constexpr bool kPackedKeys = sizeof(Idx) == 4 && sizeof(Val) == 4;
  constexpr Idx kNoNext = std::numeric_limits<Idx>::max();
  const std::size_t n = shapes.size();
  PaddedPlacement out;
  std::vector<std::int64_t>& offsets = out.offsets;
  offsets.resize(n);  // every entry is written below
  const bool record_order = n <= std::numeric_limits<std::uint32_t>::max();
  if (record_order) {
    out.start_order.reserve(n);
  }
  // Called at each placement, which happens in increasing offset order (T, its gap's fragments,
  // its conjugate, the next regular, ..., the tail).
  const auto placed_at = [&](std::size_t id, std::int64_t numel) {
    if (record_order && numel > 0) {
      out.start_order.push_back(static_cast<std::uint32_t>(id));
    }
  };
  auto name = [&](std::size_t i) {
    return internal::tensor_name(static_cast<std::int64_t>(i), shapes[i]);
  };

  // Step 3: regulars in id order; fragments in the global order (numel desc, id asc). A stable
  // radix sort on chunk - 1 - numel over the fragments in id order yields it directly; the sort
  // carries each fragment's index f among the fragments, and f finds its id and alignment.
  std::vector<std::int64_t>& numel_of = out.numel_of;  // by id, for GlobalLayout's check
  numel_of.resize(n);
  std::size_t num_regulars = 0;
  for (std::size_t i = 0; i < n; ++i) {
    numel_of[i] = shapes[i].numel();
    if (numel_of[i] >= chunk) {
      ++num_regulars;
    }
  }
  const std::size_t num_frags = n - num_regulars;
  std::vector<RegularRecord<Idx>> regulars;
  regulars.reserve(num_regulars);
  std::vector<FragmentIdAlign<Idx, Val>> frag_by_f;
  frag_by_f.reserve(num_frags);
  std::vector<std::uint64_t> packed_keys;     // key << 32 | f, when kPackedKeys
  std::vector<internal::KeyIndex> key_pairs;  // (key, f) otherwise
  if constexpr (kPackedKeys) {
    packed_keys.reserve(num_frags);
  } else {
    key_pairs.reserve(num_frags);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t numel = numel_of[i];
    if (numel >= chunk) {
      regulars.push_back({numel, static_cast<Idx>(i), false});
      continue;
    }
    const auto key = static_cast<std::uint64_t>(chunk - 1 - numel);
    const std::size_t f = frag_by_f.size();
    if constexpr (kPackedKeys) {
      packed_keys.push_back(key << 32 | f);
    } else {
      key_pairs.push_back({key, f});
    }
    // Fits Val: a fragment's alignment divides the chunk.
    frag_by_f.push_back(
        {static_cast<Idx>(i), static_cast<Val>(block_size * fast_row_size(shapes[i]))});
  }
  if constexpr (kPackedKeys) {
    internal::stable_radix_sort_by_high_bits(packed_keys, 32);
  } else {
    internal::stable_radix_sort(key_pairs);
  }
  const auto key_at = [&](std::size_t p) -> internal::KeyIndex {
    if constexpr (kPackedKeys) {
      return {packed_keys[p] >> 32, packed_keys[p] & 0xFFFFFFFFU};
    } else {
      return key_pairs[p];
    }
  };
  std::vector<FragmentRecord<Idx, Val>> frags(num_frags);
  std::vector<Val> pos_numel(num_frags);  // frags[p].numel, dense for first_at_most's last probes
  constexpr std::size_t kPrefetchAhead = 16;  // the gathers below are independent misses
  for (std::size_t p = 0; p < num_frags; ++p) {
    if (p + kPrefetchAhead < num_frags) {
      __builtin_prefetch(&frag_by_f[key_at(p + kPrefetchAhead).index]);
    }
    const internal::KeyIndex k = key_at(p);
    const FragmentIdAlign<Idx, Val>& fa = frag_by_f[k.index];
    // Fits Val: a fragment's numel is below the chunk.
    pos_numel[p] = static_cast<Val>(chunk - 1 - static_cast<std::int64_t>(k.key));
    frags[p] = {pos_numel[p], fa.align, fa.id, kNoNext};
  }
  frag_by_f = {};
  packed_keys = {};
  key_pairs = {};

  // Fragment classes: whether a fragment fits a gap depends only on (numel, alignment), and the
  // reference always takes the first remaining fragment that fits, so a class is consumed in
  // position order. Only each class's first remaining fragment (its head) is live; next links
  // each position to the next of its class. Equal numels are contiguous in the global order: a
  // numel run of one fragment is its own class, and a longer run links its members through
  // per-alignment "last seen in this run" slots.
  internal::SuccessorSet live(num_frags);  // live class heads (minus the gap's blocked ones)
  {
    std::unordered_map<std::int64_t, std::size_t> align_slot;
    std::vector<std::size_t> slot_last;  // last position seen with this alignment
    std::vector<std::size_t> slot_run;   // numel run in which it was seen
    std::size_t run = 0;
    for (std::size_t p = 0; p < num_frags;) {
      std::size_t end = p + 1;
      while (end < num_frags && frags[end].numel == frags[p].numel) {
        ++end;
      }
      if (end - p == 1) {
        live.insert(p);
        p = end;
        continue;
      }
      ++run;
      for (; p < end; ++p) {
        const auto [it, inserted] = align_slot.try_emplace(frags[p].align, slot_last.size());
        if (inserted) {
          slot_last.push_back(kNone);
          slot_run.push_back(0);
        }
        const std::size_t slot = it->second;
        if (slot_run[slot] == run) {
          frags[slot_last[slot]].next = static_cast<Idx>(p);
        } else {
          live.insert(p);  // class head
        }
        slot_last[slot] = p;
        slot_run[slot] = run;
      }
    }
  }
  // The first position whose numel is <= a threshold: numels do not increase with the position,
  // so a binary search over every kStride-th numel (a small array, in cache) narrows it to one
  // stride of pos_numel (one cache line).
  constexpr std::size_t kStride = 16;
  std::vector<Val> stride_numel((num_frags + kStride - 1) / kStride);
  for (std::size_t j = 0; j < stride_numel.size(); ++j) {
    stride_numel[j] = pos_numel[j * kStride];
  }
  const auto first_at_most = [&](std::int64_t threshold) -> std::size_t {
    if (threshold < 0) {
      return num_frags;
    }
    const auto above = [threshold](Val v) { return static_cast<std::int64_t>(v) > threshold; };
    const auto j = static_cast<std::size_t>(
        std::partition_point(stride_numel.begin(), stride_numel.end(), above) -
        stride_numel.begin());
    // Positions up to (j - 1) * kStride are above the threshold; j * kStride is not.
    std::size_t lo = j == 0 ? 0 : (j - 1) * kStride + 1;
    std::size_t hi = std::min(j * kStride, num_frags);
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (above(pos_numel[mid])) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  };
  std::vector<std::uint64_t> placed((num_frags + 63) / 64, 0);  // bit p: fragment p is placed

  // Conjugate candidates: numel % chunk of each unused regular (inactive when 0 or used).
  const std::size_t num_regs = regulars.size();
  BucketMinTree<Val> reg_tree(num_regs);
  for (std::size_t q = 0; q < num_regs; ++q) {
    const std::int64_t rc = regulars[q].numel % chunk;
    if (rc != 0) {
      reg_tree.init(q, rc);
    }
  }
  reg_tree.build();

  std::vector<std::size_t> blocked;  // class heads that failed in the current gap
  std::int64_t next = 0;
  std::size_t head = 0;
  while (true) {
    while (head < num_regs && regulars[head].used) {
      ++head;
    }
    if (head == num_regs) {
      break;
    }
    // Step 4: pop the first regular T.
    const std::size_t t = regulars[head].id;
    const std::int64_t t_numel = regulars[head].numel;
    regulars[head].used = true;
    reg_tree.deactivate(head);
    ++head;
    offsets[t] = next;
    placed_at(t, t_numel);
    const std::int64_t rem = t_numel % chunk;
    std::int64_t gap_start = 0;
    if (!checked_add(next, t_numel, &gap_start)) {
      return overflow_error(str_cat("placing ", name(t)));
    }
    if (rem == 0) {
      next = gap_start;
      continue;
    }
    if (!checked_pad(gap_start, chunk, &next)) {
      return overflow_error(str_cat("padding ", name(t), " to the chunk"));
    }
    std::int64_t gap_end = next;
    std::size_t conjugate = kNone;
    std::int64_t conjugate_numel = 0;
    // 4c: the first remaining regular (in id order; all remaining ones follow T) with
    // 0 < rc <= chunk - rem.
    const std::size_t q = reg_tree.leftmost_at_most(chunk - rem);
    if (q != kNone) {
      RegularRecord<Idx>& c = regulars[q];
      c.used = true;
      reg_tree.deactivate(q);
      const std::int64_t rc = c.numel % chunk;
      conjugate = c.id;
      conjugate_numel = c.numel;
      offsets[conjugate] = next - rc;
      gap_end = offsets[conjugate];
      if (!checked_add(next, c.numel - rc, &next)) {
        return overflow_error(str_cat("placing conjugate ", name(conjugate)));
      }
    }
    // 4d: repeatedly place the first remaining fragment (global order) that fits. A fragment the
    // reference skips earlier in the walk cannot fit later because gap_start only grows, so "first
    // after the cursor" equals "first overall"; a class that fails is masked until the gap ends.
    while (true) {
      const std::size_t p = live.next_at_or_after(first_at_most(gap_end - gap_start));
      if (p == kNone) {
        break;
      }
      const FragmentRecord<Idx, Val> f = frags[p];
      live.erase(p);
      std::int64_t at = 0;
      if (checked_pad(gap_start, f.align, &at) && at <= gap_end - f.numel) {
        offsets[f.id] = at;
        placed_at(f.id, f.numel);
        gap_start = at + f.numel;
        placed[p / 64] |= std::uint64_t{1} << (p % 64);
        if (f.next != kNoNext) {
          live.insert(f.next);
        }
      } else {
        blocked.push_back(p);
      }
    }
    for (const std::size_t p : blocked) {
      live.insert(p);
    }
    blocked.clear();
    if (conjugate != kNone) {
      placed_at(conjugate, conjugate_numel);  // at gap_end, after the gap's fragments
    }
  }

  // Step 5: the tail, in global fragment order.
  for (std::size_t p = 0; p < num_frags; ++p) {
    if ((placed[p / 64] >> (p % 64) & 1U) != 0) {
      continue;
    }
    const FragmentRecord<Idx, Val>& f = frags[p];
    if (!checked_pad(next, f.align, &next)) {
      return overflow_error(str_cat("aligning ", name(f.id), " in the tail"));
    }
    offsets[f.id] = next;
    placed_at(f.id, f.numel);
    if (!checked_add(next, f.numel, &next)) {
      return overflow_error(str_cat("placing ", name(f.id), " in the tail"));
    }
  }
  out.end = next;
  return out;
}

Expected<PaddedPlacement> padded_offsets(std::span<const Shape> shapes, std::int64_t block_size,
                                         std::int64_t chunk) {
  constexpr std::uint32_t kU32Max = std::numeric_limits<std::uint32_t>::max();
  if (shapes.size() < kU32Max && chunk < kU32Max) {
    return padded_offsets_impl<std::uint32_t, std::uint32_t>(shapes, block_size, chunk);
  }
  return padded_offsets_impl<std::size_t, std::int64_t>(shapes, block_size, chunk);
}

std::vector<Shape> to_vector(std::span<const Shape> shapes) {
  return std::vector<Shape>(shapes.begin(), shapes.end());
}

}  // namespace

Expected<GlobalLayout> build_row_atomic_layout(std::span<const Shape> shapes, std::int64_t dp_size,
                                               std::int64_t block_size, ShardLayout shard_layout) {
  if (shard_layout == ShardLayout::kUnpadded) {
    return build_for_row_atomic_unpadding(shapes, dp_size, block_size);
  }
  return build_for_row_atomic(shapes, dp_size, block_size);
}

Expected<GlobalLayout> build_for_row_atomic(std::span<const Shape> shapes, std::int64_t dp_size,
                                            std::int64_t block_size) {
  FSDP_TRY(const RowAtomicInputs in, check_row_atomic_inputs(shapes, dp_size, block_size));
  FSDP_TRY(PaddedPlacement placement, padded_offsets(shapes, block_size, in.chunk));
  const std::int64_t end = placement.end;
  // Step 6: pad to chunk * dp; equal segments.
  std::int64_t unit = 0;
  std::int64_t size = 0;
  if (!checked_mul(in.chunk, dp_size, &unit) || !checked_pad(end, unit, &size)) {
    return out_of_range(str_cat("padded layout size overflows int64: data ends at ", end,
                                " and must be padded to a multiple of chunk ", in.chunk,
                                " times dp size ", dp_size));
  }
  const std::int64_t segment = size / dp_size;
  std::vector<std::int64_t> rank_to_offset(static_cast<std::size_t>(dp_size));
  for (std::size_t k = 0; k < rank_to_offset.size(); ++k) {
    rank_to_offset[k] = static_cast<std::int64_t>(k) * segment;
  }
  FSDP_TRY(GlobalLayout layout,
           internal::make_layout_with_start_order(to_vector(shapes), std::move(placement.offsets),
                                                  size, std::move(rank_to_offset),
                                                  placement.numel_of, placement.start_order));
  // Step 7.
  const Status valid = validate_for_row_atomic(layout, block_size);
  FSDP_CHECK(valid.ok()) << "padded layout failed validation: " << valid.error().message();
  return layout;
}

Expected<GlobalLayout> build_for_row_atomic_unpadding(std::span<const Shape> shapes,
                                                      std::int64_t dp_size,
                                                      std::int64_t block_size) {
  FSDP_RETURN_IF_ERROR(check_dp_size(dp_size));
  if (block_size <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("block size must be positive, got ", block_size));
  }
  // After these checks each alignment is block_size * row_size without overflow (not stored).
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    FSDP_TRY(const std::int64_t a,
             internal::checked_row_alignment(static_cast<std::int64_t>(i), shapes[i], block_size));
    static_cast<void>(a);
  }
  // Packed offsets in id order.
  std::vector<std::int64_t> offsets(shapes.size());
  std::int64_t size = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    offsets[i] = size;
    if (!checked_add(size, shapes[i].numel(), &size)) {
      return out_of_range(str_cat("unpadded layout size overflows int64 at ",
                                  internal::tensor_name(static_cast<std::int64_t>(i), shapes[i]),
                                  ": offset ", offsets[i], " plus numel ", shapes[i].numel(),
                                  " exceeds ", kInt64Max));
    }
  }
  // Boundary k: the row/block boundary of the tensor containing t_k = k*size/dp nearest to t_k
  // (ties to the lower one). Everything is scaled by dp and compared in __int128, so t_k is never
  // rounded. The ideal points increase with k, so one pointer walks the tensors.
  const I128 dp = dp_size;
  std::vector<std::int64_t> rank_to_offset(static_cast<std::size_t>(dp_size), 0);
  std::size_t t = 0;
  for (std::int64_t k = 1; k < dp_size; ++k) {
    const I128 ideal = static_cast<I128>(k) * size;  // t_k * dp
    while (t < shapes.size() && (static_cast<I128>(offsets[t]) + shapes[t].numel()) * dp <= ideal) {
      ++t;  // tensor t ends at or before t_k (zero-numel tensors never contain a point)
    }
    std::int64_t b = size;
    if (t < shapes.size()) {
      const I128 d = ideal - static_cast<I128>(offsets[t]) * dp;  // (t_k - offset) * dp >= 0
      const std::int64_t align_t = block_size * shapes[t].row_size();
      const I128 step = static_cast<I128>(align_t) * dp;
      const I128 j = d / step;
      const I128 below = d - j * step;
      const I128 above = step - below;
      const I128 chosen = below <= above ? j : j + 1;
      b = offsets[t] + static_cast<std::int64_t>(chosen) * align_t;
    }
    rank_to_offset[static_cast<std::size_t>(k)] = b;
  }
  FSDP_TRY(GlobalLayout layout, GlobalLayout::make(to_vector(shapes), std::move(offsets), size,
                                                   std::move(rank_to_offset)));
  const Status valid = validate_for_row_atomic_unpadded(layout, block_size);
  FSDP_CHECK(valid.ok()) << "unpadded layout failed validation: " << valid.error().message();
  return layout;
}

Expected<GlobalLayout> build_for_tensor_atomic(std::span<const Shape> shapes, std::int64_t dp_size,
                                               std::span<const std::int64_t> tensor_owners) {
  FSDP_RETURN_IF_ERROR(check_dp_size(dp_size));
  if (tensor_owners.size() != shapes.size()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("the number of tensor owners must match the number of tensors: expected ",
                         shapes.size(), ", got ", tensor_owners.size()));
  }
  const auto dp = static_cast<std::size_t>(dp_size);
  std::vector<std::int64_t> per_rank(dp, 0);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const std::int64_t owner = tensor_owners[i];
    if (owner < 0 || owner >= dp_size) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(internal::tensor_name(static_cast<std::int64_t>(i), shapes[i]),
                           " owner must be an integer within the range of data parallel size [0, ",
                           dp_size, "), got ", owner));
    }
    auto& load = per_rank[static_cast<std::size_t>(owner)];
    if (!checked_add(load, shapes[i].numel(), &load)) {
      return out_of_range(str_cat("tensor-atomic rank ", owner, " size overflows int64 at ",
                                  internal::tensor_name(static_cast<std::int64_t>(i), shapes[i])));
    }
  }
  std::vector<std::int64_t> rank_to_offset(dp, 0);
  std::int64_t size = 0;
  for (std::size_t k = 0; k < dp; ++k) {
    rank_to_offset[k] = size;
    if (!checked_add(size, per_rank[k], &size)) {
      return out_of_range(str_cat("tensor-atomic layout size overflows int64 at rank ", k,
                                  ": expected at most ", kInt64Max, " elements"));
    }
  }
  std::vector<std::int64_t> cursor = rank_to_offset;
  std::vector<std::int64_t> offsets(shapes.size());
  std::vector<std::int64_t> numel_of(shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    auto& c = cursor[static_cast<std::size_t>(tensor_owners[i])];
    offsets[i] = c;
    numel_of[i] = shapes[i].numel();
    c += numel_of[i];
  }
  cursor = {};
  // The non-empty tensors in order of offset (by owner, then id), by counting sort on the owner:
  // GlobalLayout's overlap check then needs no sort.
  std::vector<std::uint32_t> start_order;
  if (shapes.size() < std::numeric_limits<std::uint32_t>::max()) {
    std::vector<std::uint32_t> slot(dp + 1, 0);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      if (numel_of[i] > 0) {
        ++slot[static_cast<std::size_t>(tensor_owners[i]) + 1];
      }
    }
    for (std::size_t k = 0; k < dp; ++k) {
      slot[k + 1] += slot[k];
    }
    start_order.resize(slot[dp]);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      if (numel_of[i] > 0) {
        start_order[slot[static_cast<std::size_t>(tensor_owners[i])]++] =
            static_cast<std::uint32_t>(i);
      }
    }
  }
  FSDP_TRY(GlobalLayout layout,
           internal::make_layout_with_start_order(to_vector(shapes), std::move(offsets), size,
                                                  std::move(rank_to_offset), numel_of,
                                                  start_order));
  const Status valid = validate_for_tensor_atomic(layout);
  FSDP_CHECK(valid.ok()) << "tensor-atomic layout failed validation: " << valid.error().message();
  return layout;
}

Expected<std::vector<std::int64_t>> row_atomic_alignments(std::span<const Shape> shapes,
                                                          std::int64_t block_size) {
  if (block_size <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("block size must be positive, got ", block_size));
  }
  std::vector<std::int64_t> out;
  out.reserve(shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].ndim() == 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(internal::tensor_name(static_cast<std::int64_t>(i), shapes[i]),
                           " has 0 dims; expected at least 1 dim for a row alignment"));
    }
    std::int64_t a = 0;
    if (!checked_mul(block_size, shapes[i].row_size(), &a)) {
      return out_of_range(str_cat(internal::tensor_name(static_cast<std::int64_t>(i), shapes[i]),
                                  " alignment overflows int64: block size ", block_size,
                                  " times row size ", shapes[i].row_size(), " exceeds ",
                                  kInt64Max));
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace fsdp
