// SPDX-License-Identifier: Apache-2.0
// EventQueue: the simulator's future-event list, a 4-ary min-heap of 32-byte POD events in a
// preallocated array, ordered by (time, insertion sequence) so that equal-time events pop in the
// order they were pushed and every run is reproducible. No virtual calls, no per-event allocation
// once reserved (the array doubles when full). Not thread-safe.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/base/check.h"
#include "sim/engine/sim_time.h"

namespace fsdp::sim {

enum class EventKind : std::uint8_t {
  kStreamReady,     // the stream `subject` may try to issue its next op
  kOpDone,          // the compute op running on stream `subject` finishes
  kFlowDone,        // the transfer of collective flow `subject` finishes
  kCollectiveDone,  // collective flow `subject` (its latency passed) ends on every member
};

struct Event {
  SimTime t;
  std::uint64_t seq = 0;
  std::uint32_t subject = 0;     // a stream id (class * kNumStreams + stream) or a flow id
  std::uint32_t generation = 0;  // must match the subject's generation, else the event is stale
  EventKind kind = EventKind::kStreamReady;
  // Named padding: with a tail of padding the compiler copies an Event as two overlapping 16-byte
  // moves (bytes 0-15 and 9-24), and the second load straddles the two stores that built the
  // event on the stack, which defeats store forwarding on every heap move.
  std::uint8_t unused[7] = {};
};
static_assert(sizeof(Event) == 32);
// EventQueue::push writes an Event as two 16-byte halves: {t, seq} and {subject | generation << 32,
// kind}, little-endian.
static_assert(offsetof(Event, seq) == 8 && offsetof(Event, subject) == 16 &&
              offsetof(Event, generation) == 20 && offsetof(Event, kind) == 24);
static_assert(std::endian::native == std::endian::little);
static_assert(std::is_trivially_copyable_v<Event>);

class EventQueue {
 public:
  void reserve(std::size_t n) {
    if (n > heap_.size()) {
      heap_.resize(n);
    }
  }
  // Empties the queue and restarts the insertion sequence; keeps the capacity.
  void clear() {
    size_ = 0;
    next_seq_ = 0;
  }
  void push(SimTime t, EventKind kind, std::uint32_t subject, std::uint32_t generation);
  // FSDP_DCHECKs !empty().
  Event pop();
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  std::uint64_t pushed() const { return next_seq_; }

 private:
  static constexpr std::size_t kArity = 4;
  static bool before(const Event& a, const Event& b) {
    return a.t < b.t || (a.t == b.t && a.seq < b.seq);
  }
  [[gnu::noinline]] void grow() { heap_.resize(heap_.empty() ? 64 : 2 * heap_.size()); }
  // Slots [0, size_) hold the heap; the vector's size is the capacity, so a push constructs
  // nothing and only writes its final slot.
  std::vector<Event> heap_;
  std::size_t size_ = 0;
  std::uint64_t next_seq_ = 0;
};

// Inline: both run once or twice per simulated event. Hole sifting moves one event per level
// instead of swapping two, and the four children of a node share one 128-byte span of the array.
// A new event's sequence number exceeds every queued one, so it sifts up past strictly later
// times only. The new event is written once, into its final slot, as two 16-byte halves assembled
// in registers: an event written field by field and then read as a whole (the sifts move events
// as 16-byte vectors) is loaded from narrower stores still in flight, which defeats store
// forwarding; that stall, in push and in pop, cost about a fifth of the engine's time.
inline void EventQueue::push(SimTime t, EventKind kind, std::uint32_t subject,
                             std::uint32_t generation) {
  const std::uint64_t seq = next_seq_++;
  if (size_ == heap_.size()) [[unlikely]] {
    grow();
  }
  std::size_t hole = size_++;
  Event* const h = heap_.data();
  while (hole > 0) {
    const std::size_t parent = (hole - 1) / kArity;
    if (!(t < h[parent].t)) {
      break;
    }
    h[hole] = h[parent];
    hole = parent;
  }
  // The field order and widths of the halves are fixed by the static_asserts after Event.
  using Half = std::int64_t __attribute__((vector_size(16)));
  const Half first = {t.ps(), static_cast<std::int64_t>(seq)};
  const Half second = {static_cast<std::int64_t>(subject | std::uint64_t{generation} << 32),
                       static_cast<std::int64_t>(kind)};
  char* const slot = reinterpret_cast<char*>(h + hole);
  std::memcpy(slot, &first, sizeof(first));
  std::memcpy(slot + sizeof(first), &second, sizeof(second));
}

inline Event EventQueue::pop() {
  FSDP_DCHECK(size_ > 0);
  Event* const h = heap_.data();
  const Event top = h[0];
  const std::size_t n = --size_;
  if (n == 0) {
    return top;
  }
  const Event last = h[n];
  std::size_t hole = 0;
  while (true) {
    const std::size_t first = kArity * hole + 1;
    if (first >= n) {
      break;
    }
    std::size_t child = first;
    const std::size_t stop = first + kArity < n ? first + kArity : n;
    for (std::size_t k = first + 1; k < stop; ++k) {
      if (before(h[k], h[child])) {
        child = k;
      }
    }
    if (!before(h[child], last)) {
      break;
    }
    h[hole] = h[child];
    hole = child;
  }
  h[hole] = last;
  return top;
}

}  // namespace fsdp::sim
