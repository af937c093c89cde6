// SPDX-License-Identifier: Apache-2.0
// EventQueue: the simulator's future-event list, a 4-ary min-heap of 32-byte POD events on a
// reserved vector, ordered by (time, insertion sequence) so that equal-time events pop in the
// order they were pushed and every run is reproducible. No virtual calls, no per-event allocation
// once reserved. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
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
};
static_assert(sizeof(Event) <= 32);
static_assert(std::is_trivially_copyable_v<Event>);

class EventQueue {
 public:
  void reserve(std::size_t n) { heap_.reserve(n); }
  // Empties the queue and restarts the insertion sequence; keeps the capacity.
  void clear() {
    heap_.clear();
    next_seq_ = 0;
  }
  void push(SimTime t, EventKind kind, std::uint32_t subject, std::uint32_t generation);
  // FSDP_DCHECKs !empty().
  Event pop();
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  std::uint64_t pushed() const { return next_seq_; }

 private:
  static constexpr std::size_t kArity = 4;
  static bool before(const Event& a, const Event& b) {
    return a.t < b.t || (a.t == b.t && a.seq < b.seq);
  }
  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

// Inline: both run once or twice per simulated event. Hole sifting moves one event per level
// instead of swapping two, and the four children of a node share one 128-byte span of the array.
inline void EventQueue::push(SimTime t, EventKind kind, std::uint32_t subject,
                             std::uint32_t generation) {
  Event ev;
  ev.t = t;
  ev.seq = next_seq_++;
  ev.subject = subject;
  ev.generation = generation;
  ev.kind = kind;
  std::size_t hole = heap_.size();
  heap_.push_back(ev);
  while (hole > 0) {
    const std::size_t parent = (hole - 1) / kArity;
    if (!before(ev, heap_[parent])) {
      break;
    }
    heap_[hole] = heap_[parent];
    hole = parent;
  }
  heap_[hole] = ev;
}

inline Event EventQueue::pop() {
  FSDP_DCHECK(!heap_.empty());
  const Event top = heap_.front();
  const Event last = heap_.back();
  heap_.pop_back();
  const std::size_t n = heap_.size();
  if (n == 0) {
    return top;
  }
  std::size_t hole = 0;
  while (true) {
    const std::size_t first = kArity * hole + 1;
    if (first >= n) {
      break;
    }
    std::size_t child = first;
    const std::size_t stop = first + kArity < n ? first + kArity : n;
    for (std::size_t k = first + 1; k < stop; ++k) {
      if (before(heap_[k], heap_[child])) {
        child = k;
      }
    }
    if (!before(heap_[child], last)) {
      break;
    }
    heap_[hole] = heap_[child];
    hole = child;
  }
  heap_[hole] = last;
  return top;
}

}  // namespace fsdp::sim
