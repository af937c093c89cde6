// SPDX-License-Identifier: Apache-2.0
// Sweep engine. Points are independent, so the pool hands out indices from one atomic counter
// and writes each outcome into its own slot: no locks, and the output order never depends on
// which thread ran what.
#include "sweep/sweep.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/check.h"
#include "core/base/strings.h"
#include "core/mesh/placements.h"

namespace fsdp::sweep {
namespace {

bool usable(const SweepOutcome& o) { return o.error.empty() && o.fits; }

// The DP axes over `ranks` (one axis, or dp_outer x dp_inner when inner > 0) and the split's
// axis innermost.
Expected<DeviceMesh> sweep_mesh(std::int64_t ranks, std::int64_t inner, std::int64_t tp,
                                std::int64_t ep) {
  std::vector<MeshAxis> axes;
  if (inner > 0) {
    axes = {MeshAxis{"dp_outer", ranks / inner}, MeshAxis{"dp_inner", inner}};
  } else {
    axes = {MeshAxis{"dp", ranks}};
  }
  if (tp > 1) {
    axes.push_back(MeshAxis{std::string(kTensorParallelAxis), tp});
  }
  if (ep > 1) {
    axes.push_back(MeshAxis{std::string(kExpertParallelAxis), ep});
  }
  return DeviceMesh::make(std::move(axes));
}

// (tp, ep) of a point's mesh.
std::pair<std::int64_t, std::int64_t> split_of(const DeviceMesh& mesh) {
  std::pair<std::int64_t, std::int64_t> out{1, 1};
  if (const auto a = mesh.axis_index(kTensorParallelAxis)) {
    out.first = mesh.axis_size(*a);
  }
  if (const auto a = mesh.axis_index(kExpertParallelAxis)) {
    out.second = mesh.axis_size(*a);
  }
  return out;
}

}  // namespace

Expected<std::vector<SweepPoint>> enumerate_sweep(const SweepSpace& space) {
  if (space.ranks < 1 || space.ranks > (std::int64_t{1} << 30)) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("the sweep has ", space.ranks, " ranks; expected 1 to 2^30"));
  }
  std::vector<std::optional<RecomputePolicy>> recompute_values(space.recompute.begin(),
                                                               space.recompute.end());
  if (recompute_values.empty()) {
    recompute_values.emplace_back();  // the base's
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> splits;
  for (const std::int64_t tp : space.tp_sizes) {
    for (const std::int64_t ep : space.ep_sizes) {
      if (tp >= 1 && ep >= 1 && (tp == 1 || ep == 1) && space.ranks % (tp * ep) == 0) {
        splits.emplace_back(tp, ep);
      }
    }
  }
  std::vector<SweepPoint> points;
  for (Strategy strategy : space.strategies) {
    std::vector<DeviceMesh> meshes;
    const bool two_axis = strategy_mesh_ndim(strategy) == 2;
    for (const auto& [tp, ep] : splits) {
      const std::int64_t dp = space.ranks / (tp * ep);
      if (!two_axis) {
        FSDP_TRY(DeviceMesh mesh, sweep_mesh(dp, 0, tp, ep));
        meshes.push_back(std::move(mesh));
      } else if (space.inner_sizes.empty()) {
        for (std::int64_t inner = 2; inner < dp; ++inner) {
          if (dp % inner == 0) {
            FSDP_TRY(DeviceMesh mesh, sweep_mesh(dp, inner, tp, ep));
            meshes.push_back(std::move(mesh));
          }
        }
      } else {
        for (std::int64_t inner : space.inner_sizes) {
          if (inner >= 1 && dp % inner == 0) {
            FSDP_TRY(DeviceMesh mesh, sweep_mesh(dp, inner, tp, ep));
            meshes.push_back(std::move(mesh));
          }
        }
      }
    }
    for (const DeviceMesh& mesh : meshes) {
      for (ShardLayout layout : space.layouts) {
        // Unpadded layouts need a 1-axis dp mesh (an ep axis is a second one).
        if (layout == ShardLayout::kUnpadded &&
            (two_axis || strategy == Strategy::kNoShard || split_of(mesh).second > 1)) {
          continue;
        }
        for (std::int64_t mb : space.microbatches) {
          for (const PrefetchPolicy& prefetch : space.prefetch) {
            for (bool unified : space.unified_streams) {
              for (const std::optional<RecomputePolicy>& recompute : recompute_values) {
                points.push_back(SweepPoint{static_cast<std::int64_t>(points.size()), strategy,
                                            mesh, layout, mb, prefetch, unified, recompute});
              }
            }
          }
        }
      }
    }
  }
  return points;
}

ConfigOptions point_config(const ConfigOptions& base, const SweepPoint& point) {
  ConfigOptions o = base;
  o.mesh = point.mesh;
  o.strategy = point.strategy;
  o.tensor_atomic = false;
  o.placements.reset();
  o.shard_layout = point.layout;
  o.microbatches = point.microbatches;
  if (point.recompute.has_value()) {
    o.recompute = *point.recompute;
  }
  auto schedule = SchedulePolicy::make(point.prefetch, point.prefetch,
                                       base.schedule.max_inflight_all_gathers(),
                                       point.unified_streams);
  // The base's cap is already valid; prefetch policies are valid by construction.
  FSDP_CHECK(schedule.has_value()) << schedule.error().message();
  o.schedule = std::move(schedule).value();
  return o;
}

SweepOutcome run_sweep_point(const SweepBase& base, const SweepPoint& point) {
  SweepOutcome o;
  o.index = point.index;
  try {
    auto config = assemble_config(point_config(base.config, point));
    if (!config) {
      o.error = config.error().message();
      return o;
    }
    const std::pair<std::int64_t, std::int64_t> split = split_of(point.mesh);
    const Model* model = &base.model;
    if (split != std::pair<std::int64_t, std::int64_t>{1, 1}) {
      const auto it = base.split_models.find(split);
      if (it == base.split_models.end()) {
        o.error = str_cat("no model split for tp=", split.first, ", ep=", split.second);
        return o;
      }
      model = &it->second;
    }
    auto schedule = build_schedule(*model, *config, base.workload);
    if (!schedule) {
      o.error = schedule.error().message();
      return o;
    }
    auto result = sim::simulate(*schedule, base.hardware, base.sim);
    if (!result) {
      o.error = "while simulating: " + result.error().message();
      return o;
    }
    o.step_time_ps = result->step_time.ps();
    const sim::MemoryVerdict memory = sim::memory_verdict(*result, base.hardware);
    o.fits = memory.fits;
    o.headroom_bytes = memory.headroom_bytes;
    const sim::Throughput throughput = sim::throughput_of(
        *schedule, static_cast<double>(o.step_time_ps) * 1e-12, base.flops, base.hardware);
    o.tokens_per_step = throughput.tokens_per_step;
    o.tokens_per_second_per_gpu = throughput.tokens_per_second_per_gpu;
    o.tflops_per_gpu = throughput.tflops_per_gpu;
    o.mfu = throughput.mfu;
    o.rank_classes = static_cast<std::int64_t>(result->classes.size());
    o.events = result->events;
    o.overlap_fraction = 1.0;
    for (const sim::ClassResult& c : result->classes) {
      o.peak_bytes = std::max(o.peak_bytes, c.memory.peak_bytes);
      o.peak_reserved_bytes = std::max(o.peak_reserved_bytes, c.memory.peak_reserved_bytes);
      o.exposed_communication_ps =
          std::max(o.exposed_communication_ps, c.exposed_communication.ps());
      o.overlap_fraction = std::min(o.overlap_fraction, c.overlap_fraction);
    }
  } catch (const std::exception& e) {
    o = SweepOutcome{};
    o.index = point.index;
    o.error = str_cat("unexpected failure: ", e.what());
  }
  return o;
}

std::vector<SweepOutcome> run_sweep_points(
    const SweepBase& base, const std::vector<SweepPoint>& points,
    const std::vector<std::int64_t>& which, int jobs,
    const std::function<void(std::int64_t, std::int64_t)>& progress) {
  const auto total = static_cast<std::int64_t>(which.size());
  std::vector<SweepOutcome> outcomes(which.size());
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
  auto worker = [&] {
    for (std::int64_t i = next++; i < total; i = next++) {
      const auto slot = static_cast<std::size_t>(i);
      // No exception may leave a thread (it would std::terminate): a point that runs out of
      // memory is that point's error (issue 16).
      try {
        outcomes[slot] = run_sweep_point(base, points[static_cast<std::size_t>(which[slot])]);
      } catch (const std::bad_alloc&) {
        outcomes[slot].index = points[static_cast<std::size_t>(which[slot])].index;
        outcomes[slot].error = "out of memory while simulating this configuration";
      }
      if (++done == total) {
        const std::lock_guard<std::mutex> lock(mutex);
        finished.notify_all();
      }
    }
  };
  const int threads =
      static_cast<int>(std::clamp<std::int64_t>(jobs, 1, std::max<std::int64_t>(total, 1)));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // fewer threads than asked; the ones started (or this one) share the points
    }
  }
  if (pool.empty()) {
    worker();
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (done.load() < total) {
      if (progress) {
        progress(done.load(), total);
      }
      finished.wait_for(lock, std::chrono::milliseconds(200), [&] { return done.load() >= total; });
    }
  }
  for (std::thread& t : pool) {
    t.join();
  }
  if (progress) {
    progress(total, total);
  }
  return outcomes;
}

bool higher_throughput(const SweepOutcome& a, const SweepOutcome& b) {
  // tokens_a / step_a > tokens_b / step_b, cross-multiplied in 128 bits (each factor < 2^63).
  __extension__ using Wide = __int128;
  return static_cast<Wide>(a.tokens_per_step) * b.step_time_ps >
         static_cast<Wide>(b.tokens_per_step) * a.step_time_ps;
}

void mark_pareto_front(std::vector<SweepOutcome>& outcomes) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    outcomes[i].pareto = false;
    if (usable(outcomes[i])) {
      order.push_back(i);
    }
  }
  auto faster = [&](std::size_t a, std::size_t b) {
    return higher_throughput(outcomes[a], outcomes[b]);
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (faster(a, b) || faster(b, a)) {
      return faster(a, b);
    }
    return outcomes[a].peak_reserved_bytes < outcomes[b].peak_reserved_bytes;
  });
  // Walk groups of equal throughput, fastest first: a group's least-memory points are on the
  // front when they reserve strictly less memory than every faster point.
  std::int64_t best_faster = std::numeric_limits<std::int64_t>::max();
  for (std::size_t g = 0; g < order.size();) {
    std::size_t end = g + 1;
    while (end < order.size() && !faster(order[g], order[end])) {
      ++end;
    }
    const std::int64_t least = outcomes[order[g]].peak_reserved_bytes;
    if (least < best_faster) {
      for (std::size_t k = g; k < end && outcomes[order[k]].peak_reserved_bytes == least; ++k) {
        outcomes[order[k]].pareto = true;
      }
    }
    best_faster = std::min(best_faster, least);
    g = end;
  }
}

nlohmann::json outcome_to_json(const SweepOutcome& o) {
  return nlohmann::json{{"index", o.index},
                        {"error", o.error},
                        {"step_time_ps", o.step_time_ps},
                        {"peak_bytes", o.peak_bytes},
                        {"peak_reserved_bytes", o.peak_reserved_bytes},
                        {"fits", o.fits},
                        {"headroom_bytes", o.headroom_bytes},
                        {"tokens_per_step", o.tokens_per_step},
                        {"tokens_per_second_per_gpu", o.tokens_per_second_per_gpu},
                        {"tflops_per_gpu", o.tflops_per_gpu},
                        {"mfu", o.mfu},
                        {"rank_classes", o.rank_classes},
                        {"exposed_communication_ps", o.exposed_communication_ps},
                        {"overlap_fraction", o.overlap_fraction},
                        {"events", o.events}};
}

Expected<SweepOutcome> outcome_from_json(const nlohmann::json& j) {
  try {
    SweepOutcome o;
    o.index = j.at("index").get<std::int64_t>();
    o.error = j.at("error").get<std::string>();
    o.step_time_ps = j.at("step_time_ps").get<std::int64_t>();
    o.peak_bytes = j.at("peak_bytes").get<std::int64_t>();
    o.peak_reserved_bytes = j.at("peak_reserved_bytes").get<std::int64_t>();
    o.fits = j.at("fits").get<bool>();
    o.headroom_bytes = j.at("headroom_bytes").get<std::int64_t>();
    o.tokens_per_step = j.at("tokens_per_step").get<std::int64_t>();
    o.tokens_per_second_per_gpu = j.at("tokens_per_second_per_gpu").get<double>();
    o.tflops_per_gpu = j.at("tflops_per_gpu").get<double>();
    o.mfu = j.at("mfu").get<double>();
    o.rank_classes = j.at("rank_classes").get<std::int64_t>();
    o.exposed_communication_ps = j.at("exposed_communication_ps").get<std::int64_t>();
    o.overlap_fraction = j.at("overlap_fraction").get<double>();
    o.events = j.at("events").get<std::int64_t>();
    return o;
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorCode::kInvalidArgument, str_cat("sweep outcome: ", e.what()));
  }
}

}  // namespace fsdp::sweep
