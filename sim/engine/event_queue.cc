// SPDX-License-Identifier: Apache-2.0
// A 4-ary min-heap with hole sifting (one copy per level instead of a swap): half the depth of a
// binary heap, and the four children of a node share one 128-byte span of the array.
#include "sim/engine/event_queue.h"

#include "core/base/check.h"

namespace fsdp::sim {

void EventQueue::push(SimTime t, EventKind kind, std::uint32_t subject,
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

Event EventQueue::pop() {
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
