// SPDX-License-Identifier: Apache-2.0
// The PADDED builder reproduces the reference's quadratic first-fit algorithm (fsdp-behaviour.md §2.2) exactly,
// with a bucketed segment tree (conjugates) and a successor set (gap fill) instead of rescans;
// docs/design/layouts.md §3 gives the argument.
#include "core/layout/layout_builder.h"

#include "core/base/check.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/layout/internal/huge_page_allocator.h"
#include "core/layout/internal/radix_sort.h"
#include "core/layout/internal/row_alignment.h"
#include "core/layout/internal/successor_set.h"
#include "core/layout/layout_validation.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fsdp {

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
// k * size and b * dp reach 2^126: exact comparisons need 128 bits (GCC and Clang builtin).
__extension__ typedef __int128 I128;
// Ranks are int32 indices: a layout for more ranks cannot be addressed (nor fit in memory).
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
    std::int64_t a = internal::simple_row_alignment(shapes[i], block_size);
    if (a == 0) {
      FSDP_TRY(
          a, internal::checked_row_alignment(static_cast<std::int64_t>(i), shapes[i], block_size));
    }
    chunk_of.add(static_cast<std::int64_t>(i), shapes[i], a);
  }
  // The reference's lcm cannot overflow (Python ints), so every shape error above takes precedence
  // over an lcm overflow here.
  FSDP_TRY(in.chunk, chunk_of.result());
  return in;
}

constexpr std::size_t kNone = static_cast<std::size_t>(-1);
static_assert(internal::SuccessorSet::kNone == kNone);

// The builder's large temporaries: huge-page-backed where THP allows (layouts.md §3.6).
using internal::HugePageVector;

// Leftmost index whose value is <= a threshold, over a fixed array of values that only ever become
// kInactive (T's maximum; every active value and every threshold must be below it). Level 0 holds
// the values in 64-byte-aligned buckets of kBucket, and level k + 1 the minimum of each bucket of
// level k, up to a single bucket. A query reads one bucket (one cache line) per level, top-down:
// at a million tensors only the last two levels are not in L1, where a binary min tree's lowest
// levels would cost a miss each. T is uint32 when the chunk allows.
template <typename T>
class BucketMinTree {
 public:
  static constexpr T kInactive = std::numeric_limits<T>::max();
  static constexpr std::size_t kBucket = 64 / sizeof(T);

  explicit BucketMinTree(std::size_t n) : levels_(1) {
    levels_[0].resize(std::max<std::size_t>(1, (n + kBucket - 1) / kBucket));
    while (levels_.back().size() > 1) {
      const std::size_t above = (levels_.back().size() + kBucket - 1) / kBucket;
      levels_.emplace_back(above);
    }
  }
  // Sets a value; build() then computes the minima.
  void init(std::size_t i, std::int64_t value) {
    levels_[0][i / kBucket].v[i % kBucket] = static_cast<T>(value);
  }
  // Recomputes every minimum in O(n).
  void build() {
    for (std::size_t k = 0; k + 1 < levels_.size(); ++k) {
      for (std::size_t b = 0; b < levels_[k].size(); ++b) {
        levels_[k + 1][b / kBucket].v[b % kBucket] = bucket_min(levels_[k][b]);
      }
    }
  }
  void deactivate(std::size_t i) {
    levels_[0][i / kBucket].v[i % kBucket] = kInactive;
    for (std::size_t k = 0; k + 1 < levels_.size(); ++k) {
      const T m = bucket_min(levels_[k][i / kBucket]);
      i /= kBucket;
      T& up = levels_[k + 1][i / kBucket].v[i % kBucket];
      if (up == m) {
        break;
      }
      up = m;
    }
  }
  // Leftmost index with value <= threshold, or kNone, in two steps: the first bucket of level 0
  // holding one (its indices are [b * kBucket, (b + 1) * kBucket)), then the index within it. The
  // caller can prefetch what it will read about the bucket's indices in between.
  std::size_t leftmost_bucket_at_most(std::int64_t threshold) const {
    if (threshold < 0) {
      return kNone;
    }
    const T t = clamp(threshold);
    const std::size_t top = levels_.size() - 1;
    std::size_t b = first_at_most(levels_[top][0], t);
    if (b == kBucket) {
      return kNone;
    }
    if (top == 0) {
      return 0;
    }
    // b is an entry of level k, that is a bucket of level k - 1, whose first value <= t is an
    // entry of level k - 1.
    for (std::size_t k = top; k > 1; --k) {
      b = b * kBucket + first_at_most(levels_[k - 1][b], t);
    }
    return b;
  }
  // Requires b from leftmost_bucket_at_most(threshold).
  std::size_t leftmost_in_bucket(std::size_t b, std::int64_t threshold) const {
    return b * kBucket + first_at_most(levels_[0][b], clamp(threshold));
  }

 private:
  struct alignas(64) Bucket {
    Bucket() { std::fill(std::begin(v), std::end(v), kInactive); }
    T v[kBucket];
  };

  static T clamp(std::int64_t threshold) {
    return threshold >= static_cast<std::int64_t>(kInactive) ? kInactive - 1
                                                             : static_cast<T>(threshold);
  }
  static T bucket_min(const Bucket& bucket) {
    return *std::min_element(std::begin(bucket.v), std::end(bucket.v));
  }
  // Index of the bucket's first value <= t, or kBucket.
  static std::size_t first_at_most(const Bucket& bucket, T t) {
    std::uint32_t mask = 0;
    for (std::size_t i = 0; i < kBucket; ++i) {
      mask |= static_cast<std::uint32_t>(bucket.v[i] <= t ? 1U : 0U) << i;
    }
    return mask == 0 ? kBucket : static_cast<std::size_t>(std::countr_zero(mask));
  }

  std::vector<HugePageVector<Bucket>> levels_;  // levels_[0]: the values
};

// The first index whose value is <= a threshold, over n values that do not increase with the
// index (set, then build). Level 0 holds the values in 64-byte-aligned blocks of 16, and level
// k + 1 the first value of each block of level k, up to a single block; every level is padded with
// zeros. A query reads one block per level, top-down: one cache line at level 0 (two for int64)
// and hits in the small upper levels, where a binary search over the values would miss on each of
// its last probes. T is uint32 or int64, and the values are non-negative.
template <typename T>
class NonIncreasingSearch {
 public:
  static constexpr std::size_t kFan = 16;

  explicit NonIncreasingSearch(std::size_t n) : size_(n), levels_(1) {
    levels_[0].resize((n + kFan - 1) / kFan);  // zeros
  }
  // Requires i < n.
  void set(std::size_t i, T value) { levels_[0][i / kFan].v[i % kFan] = value; }
  // Builds the upper levels once every value is set.
  void build() {
    while (levels_.back().size() > 1) {
      HugePageVector<Block> above((levels_.back().size() + kFan - 1) / kFan);  // zeros
      const HugePageVector<Block>& below = levels_.back();
      for (std::size_t b = 0; b < below.size(); ++b) {
        above[b / kFan].v[b % kFan] = below[b].v[0];
      }
      levels_.push_back(std::move(above));
    }
  }

  // The first index with value <= threshold, or n when there is none.
  std::size_t first_at_most(std::int64_t threshold) const {
    if (size_ == 0 || threshold < 0) {
      return size_;  // every value is >= 0
    }
    constexpr T kMax = std::numeric_limits<T>::max();
    const T t = threshold >= static_cast<std::int64_t>(kMax) ? kMax : static_cast<T>(threshold);
    // Invariant: j is the first index of level k with value <= t (a padding zero at the latest).
    // Entry j - 1 of level k is the first value of block j - 1 of level k - 1 and is above t,
    // and entry j is the first value of block j (or padding), so the answer there is in block
    // j - 1 after the values above t.
    std::size_t j = count_above(levels_.back()[0], t);
    for (std::size_t k = levels_.size() - 1; k > 0 && j > 0; --k) {
      j = kFan * (j - 1) + count_above(levels_[k - 1][j - 1], t);
    }
    return j;
  }

 private:
  struct alignas(64) Block {
    T v[kFan] = {};
  };

  // How many of the block's values are above t: a prefix, as the values do not increase.
  static std::size_t count_above(const Block& block, T t) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < kFan; ++i) {
      count += block.v[i] > t ? std::size_t{1} : std::size_t{0};
    }
    return count;
  }

  std::size_t size_ = 0;
  std::vector<HugePageVector<Block>> levels_;  // levels_[0]: the values
};

Error overflow_error(std::string_view what) {
  return out_of_range(str_cat("padded layout overflows int64 while ", what,
                              "; expected a total size of at most ", kInt64Max, " elements"));
}

// What padded_offsets produces: the offsets by id, the non-empty tensors' ids in order of offset
// (GlobalLayout's fast overlap check; empty when n >= 2^32), and the end of the last placement
// ("next" after the tail).
struct PaddedPlacement {
  std::vector<std::int64_t> offsets;
  HugePageVector<std::uint32_t> start_order;
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
  // One pass over the shapes fills all of these, so each list is reserved for n entries: only the
  // pages written are ever touched.
  HugePageVector<RegularRecord<Idx>> regulars;
  regulars.reserve(n);
  HugePageVector<FragmentIdAlign<Idx, Val>> frag_by_f;
  frag_by_f.reserve(n);
  HugePageVector<std::uint64_t> packed_keys;     // key << 32 | f, when kPackedKeys
  HugePageVector<internal::KeyIndex> key_pairs;  // (key, f) otherwise
  if constexpr (kPackedKeys) {
    packed_keys.reserve(n);
  } else {
    key_pairs.reserve(n);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t numel = shapes[i].numel();
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
  const std::size_t num_frags = frag_by_f.size();
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
  HugePageVector<FragmentRecord<Idx, Val>> frags;
  frags.reserve(num_frags);
  NonIncreasingSearch<Val> by_numel(num_frags);  // the first position with numel <= a threshold
  constexpr std::size_t kPrefetchAhead = 16;     // the gathers below are independent misses
  for (std::size_t p = 0; p < num_frags; ++p) {
    if (p + kPrefetchAhead < num_frags) {
      __builtin_prefetch(&frag_by_f[key_at(p + kPrefetchAhead).index]);
    }
    const internal::KeyIndex k = key_at(p);
    const FragmentIdAlign<Idx, Val>& fa = frag_by_f[k.index];
    // Fits Val: a fragment's numel is below the chunk.
    const auto numel = static_cast<Val>(chunk - 1 - static_cast<std::int64_t>(k.key));
    by_numel.set(p, numel);
    frags.push_back({numel, fa.align, fa.id, kNoNext});
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
  by_numel.build();
  HugePageVector<std::uint64_t> placed((num_frags + 63) / 64, 0);  // bit p: fragment p is placed

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
    const std::size_t bucket = reg_tree.leftmost_bucket_at_most(chunk - rem);
    if (bucket != kNone) {
      // The conjugate's record is one of the bucket's: fetch them all while the bucket's values
      // are scanned, so the two cache misses overlap instead of queuing.
      constexpr std::size_t kBucket = BucketMinTree<Val>::kBucket;
      const std::size_t first = bucket * kBucket;
      const std::size_t last = std::min(first + kBucket, num_regs) - 1;
      for (std::size_t r = first; r <= last; r += 64 / sizeof(RegularRecord<Idx>)) {
        __builtin_prefetch(&regulars[r]);
      }
      __builtin_prefetch(&regulars[last]);
      const std::size_t q = reg_tree.leftmost_in_bucket(bucket, chunk - rem);
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
      const std::size_t p = live.next_at_or_after(by_numel.first_at_most(gap_end - gap_start));
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

  // Step 5: the tail, in global fragment order. Its offsets are stored at random ids: prefetch
  // them (for writing) a few positions ahead so the stores do not stall on one miss each.
  for (std::size_t p = 0; p < num_frags; ++p) {
    if (p + kPrefetchAhead < num_frags) {
      __builtin_prefetch(&offsets[frags[p + kPrefetchAhead].id], /*rw=*/1);
    }
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

// The shapes the layout will own: the caller's vector when it handed one over (`owned`, holding
// the same shapes as `shapes`), else a copy. Called after the builder's checks and placement, so an
// input they reject costs no copy.
std::vector<Shape> take_shapes(std::span<const Shape> shapes, std::vector<Shape>* owned) {
  if (owned != nullptr) {
    return std::move(*owned);
  }
  return std::vector<Shape>(shapes.begin(), shapes.end());
}

// The builders, for both overloads: `owned` is null (copy the span) or the vector `shapes` views.
Expected<GlobalLayout> padded_layout(std::span<const Shape> shapes, std::vector<Shape>* owned,
                                     std::int64_t dp_size, std::int64_t block_size) {
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
  FSDP_TRY(GlobalLayout layout, internal::make_layout_with_start_order(
                                    take_shapes(shapes, owned), std::move(placement.offsets), size,
                                    std::move(rank_to_offset), placement.start_order));
  // Step 7.
  const Status valid = validate_for_row_atomic(layout, block_size);
  FSDP_CHECK(valid.ok()) << "padded layout failed validation: " << valid.error().message();
  return layout;
}

Expected<GlobalLayout> unpadded_layout(std::span<const Shape> shapes, std::vector<Shape>* owned,
                                       std::int64_t dp_size, std::int64_t block_size) {
  FSDP_RETURN_IF_ERROR(check_dp_size(dp_size));
  if (block_size <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("block size must be positive, got ", block_size));
  }
  // After these checks each alignment is block_size * row_size without overflow (not stored).
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (internal::simple_row_alignment(shapes[i], block_size) == 0) {
      FSDP_TRY(const std::int64_t a, internal::checked_row_alignment(static_cast<std::int64_t>(i),
                                                                     shapes[i], block_size));
      static_cast<void>(a);
    }
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
  FSDP_TRY(GlobalLayout layout, GlobalLayout::make(take_shapes(shapes, owned), std::move(offsets),
                                                   size, std::move(rank_to_offset)));
  const Status valid = validate_for_row_atomic_unpadded(layout, block_size);
  FSDP_CHECK(valid.ok()) << "unpadded layout failed validation: " << valid.error().message();
  return layout;
}

Expected<GlobalLayout> tensor_atomic_layout(std::span<const Shape> shapes,
                                            std::vector<Shape>* owned, std::int64_t dp_size,
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
           internal::make_layout_with_start_order(take_shapes(shapes, owned), std::move(offsets),
                                                  size, std::move(rank_to_offset), start_order));
  const Status valid = validate_for_tensor_atomic(layout);
  FSDP_CHECK(valid.ok()) << "tensor-atomic layout failed validation: " << valid.error().message();
  return layout;
}

}  // namespace

Expected<GlobalLayout> build_row_atomic_layout(std::span<const Shape> shapes, std::int64_t dp_size,
                                               std::int64_t block_size, ShardLayout shard_layout) {
  if (shard_layout == ShardLayout::kUnpadded) {
    return unpadded_layout(shapes, nullptr, dp_size, block_size);
  }
  return padded_layout(shapes, nullptr, dp_size, block_size);
}

Expected<GlobalLayout> build_for_row_atomic(std::span<const Shape> shapes, std::int64_t dp_size,
                                            std::int64_t block_size) {
  return padded_layout(shapes, nullptr, dp_size, block_size);
}

Expected<GlobalLayout> build_for_row_atomic_unpadding(std::span<const Shape> shapes,
                                                      std::int64_t dp_size,
                                                      std::int64_t block_size) {
  return unpadded_layout(shapes, nullptr, dp_size, block_size);
}

Expected<GlobalLayout> build_for_tensor_atomic(std::span<const Shape> shapes, std::int64_t dp_size,
                                               std::span<const std::int64_t> tensor_owners) {
  return tensor_atomic_layout(shapes, nullptr, dp_size, tensor_owners);
}

Expected<GlobalLayout> internal::build_row_atomic_layout_owned(std::vector<Shape> shapes,
                                                               std::int64_t dp_size,
                                                               std::int64_t block_size,
                                                               ShardLayout shard_layout) {
  if (shard_layout == ShardLayout::kUnpadded) {
    return unpadded_layout(shapes, &shapes, dp_size, block_size);
  }
  return padded_layout(shapes, &shapes, dp_size, block_size);
}

Expected<GlobalLayout> internal::build_for_row_atomic_owned(std::vector<Shape> shapes,
                                                            std::int64_t dp_size,
                                                            std::int64_t block_size) {
  return padded_layout(shapes, &shapes, dp_size, block_size);
}

Expected<GlobalLayout> internal::build_for_row_atomic_unpadding_owned(std::vector<Shape> shapes,
                                                                      std::int64_t dp_size,
                                                                      std::int64_t block_size) {
  return unpadded_layout(shapes, &shapes, dp_size, block_size);
}

Expected<GlobalLayout> internal::build_for_tensor_atomic_owned(
    std::vector<Shape> shapes, std::int64_t dp_size, std::span<const std::int64_t> tensor_owners) {
  return tensor_atomic_layout(shapes, &shapes, dp_size, tensor_owners);
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
