// SPDX-License-Identifier: Apache-2.0
// Internal to sim/engine. LinkSharing: the flow model of link contention
// (docs/design/simulator.md, "Link contention"). A collective in flight is a Flow over the link of
// its axis (NVLink or the network) on every member class's device. Its transfer term progresses at
// 1/share of the full rate, where share is the largest count of transferring flows on that link of
// any member class; its latency term follows, unshared. When a flow starts or ends its transfer,
// the shares of the transferring flows on the same link kind are recomputed and each changed
// flow's completion is rescheduled (progress in integer ps, rounded down: a flow never ends
// early); the event of the old share goes stale by its generation. Without contention every flow
// has the whole link. Inline: the event loop calls it once or twice per collective event.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/engine/event_queue.h"
#include "sim/engine/sim_time.h"

namespace fsdp::sim::internal {

// One collective in flight: every class of group type `type` runs it on stream `stream`. Its
// transfer (the bandwidth term, `remaining` ps at the full link rate) progresses at 1/share of
// the rate, where share is the largest count of transferring flows on `link` of any member
// class; then its latency term passes unshared.
struct Flow {
  std::int32_t type = 0;
  std::int32_t stream = 0;
  std::int32_t link = 0;  // 0 intra-node, 1 inter-node
  std::int64_t remaining = 0;
  std::int64_t share = 0;  // 0: not transferring
  SimTime last;
  SimDuration latency;
  std::uint32_t generation = 0;
};

class LinkSharing {
 public:
  // `types[t]`: the member classes of group type t (SimClasses::types), which must outlive this.
  LinkSharing(const std::vector<std::vector<std::int32_t>>& types, bool contention)
      : types_(types), contention_(contention) {}

  // Forgets every flow (ids restart at 0); no link of the `num_classes` classes carries a flow.
  void reset(std::size_t num_classes) {
    load_.assign(num_classes * 2, 0);
    flows_.clear();
    free_flows_.clear();
    transferring_.clear();
  }

  const Flow& flow(std::uint32_t id) const { return flows_[id]; }
  // Events of flow `id` of an older generation are stale.
  std::uint32_t generation(std::uint32_t id) const { return flows_[id].generation; }

  // A collective of group type `type` on `stream` starts at `now` over `link`: a flow whose
  // transfer takes `transfer` at the full rate, then `latency`. Schedules its kFlowDone (at once,
  // or through the shares of its link under contention). Returns its id.
  std::int32_t start(std::int32_t type, std::int32_t stream, std::int32_t link,
                     SimDuration transfer, SimDuration latency, SimTime now, EventQueue& queue) {
    std::int32_t id = 0;
    if (free_flows_.empty()) {
      id = static_cast<std::int32_t>(flows_.size());
      flows_.emplace_back();
    } else {
      id = free_flows_.back();
      free_flows_.pop_back();
    }
    Flow& flow = flows_[static_cast<std::size_t>(id)];
    flow.type = type;
    flow.stream = stream;
    flow.link = link;
    flow.remaining = transfer.ps();
    flow.share = 0;
    flow.last = now;
    flow.latency = latency;
    ++flow.generation;
    if (!contention_ || transfer.ps() == 0) {
      queue.push(now + transfer, EventKind::kFlowDone, static_cast<std::uint32_t>(id),
                 flow.generation);
      return id;
    }
    for (std::int32_t m : types_[static_cast<std::size_t>(type)]) {
      ++load_[static_cast<std::size_t>(m) * 2 + static_cast<std::size_t>(link)];
    }
    transferring_.push_back(id);
    reshare(link, now, queue);
    return id;
  }

  // The kFlowDone of flow `id`: its transfer is over, so it leaves its link (the others on it
  // speed up). Then its latency passes: returns true if that was scheduled as a
  // kCollectiveDone, false if there is none (the collective ends now).
  bool end_transfer(std::int32_t id, SimTime now, EventQueue& queue) {
    Flow& flow = flows_[static_cast<std::size_t>(id)];
    if (flow.share > 0) {
      flow.share = 0;
      transferring_.erase(std::find(transferring_.begin(), transferring_.end(), id));
      for (std::int32_t m : types_[static_cast<std::size_t>(flow.type)]) {
        --load_[static_cast<std::size_t>(m) * 2 + static_cast<std::size_t>(flow.link)];
      }
      reshare(flow.link, now, queue);
    }
    Flow& f = flows_[static_cast<std::size_t>(id)];
    if (f.latency.ps() > 0) {
      queue.push(now + f.latency, EventKind::kCollectiveDone, static_cast<std::uint32_t>(id),
                 ++f.generation);
      return true;
    }
    return false;
  }

  // The collective of flow `id` ended on every member: the id is reused, its events are stale.
  void release(std::int32_t id) {
    ++flows_[static_cast<std::size_t>(id)].generation;
    free_flows_.push_back(id);
  }

 private:
  // Recomputes the share of every transferring flow on `link` and reschedules those that changed.
  void reshare(std::int32_t link, SimTime now, EventQueue& queue) {
    for (std::int32_t id : transferring_) {
      Flow& flow = flows_[static_cast<std::size_t>(id)];
      if (flow.link != link) {
        continue;
      }
      std::int64_t share = 1;
      for (std::int32_t m : types_[static_cast<std::size_t>(flow.type)]) {
        share = std::max<std::int64_t>(
            share, load_[static_cast<std::size_t>(m) * 2 + static_cast<std::size_t>(link)]);
      }
      if (share == flow.share) {
        continue;
      }
      if (flow.share > 0) {
        // Progress so far at the old share (rounded down: never early).
        flow.remaining = std::max<std::int64_t>(0, flow.remaining - (now - flow.last).ps() / flow.share);
      }
      flow.last = now;
      flow.share = share;
      queue.push(now + SimDuration::ps(flow.remaining * share), EventKind::kFlowDone,
                 static_cast<std::uint32_t>(id), ++flow.generation);
    }
  }

  const std::vector<std::vector<std::int32_t>>& types_;
  bool contention_ = true;
  std::vector<Flow> flows_;
  std::vector<std::int32_t> free_flows_;
  std::vector<std::int32_t> transferring_;  // flows with share > 0, in start order
  std::vector<std::int32_t> load_;          // [class * 2 + link]: transferring flows
};

}  // namespace fsdp::sim::internal
