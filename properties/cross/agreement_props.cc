// SPDX-License-Identifier: Apache-2.0
// Cross-checks of the simulator against the real CPU backend: over random tiny decoders, meshes of 1-8 ranks (HSDP/HFSDP 2x2, 2x4),
// every layout, microbatch count, prefetch depth and stream mode, the real CPU backend (ranks as
// threads, in-process collectives, 2 steps) and the simulator, both executing the same Schedule,
// agree on (1) the ops each rank runs on each stream, in order; (2) the bytes of every collective
// on every rank (the backend's side counted at the communicator, not read from the IR); (3) the
// arena's allocations and frees per stream, the high-water mark per buffer class and the return
// to the resting level after every step. See docs/design/backends.md, "Cross-checks".
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/in_process_comm.h"
#include "backends/exec/executor.h"
#include "backends/exec/trainer.h"
#include "core/base/strings.h"
#include "core/hardware/hardware_presets.h"
#include "properties/cross/gen_train_spec.h"
#include "properties/cross/rank_harness.h"
#include "sim/engine/simulator.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fsdp {
namespace {

// One collective as a communicator saw it; bytes = what this rank contributed (all-gather),
// received (reduce-scatter) or reduced (all-reduce).
struct CommCall {
  StreamKind stream = StreamKind::kCompute;
  OpKind kind = OpKind::kAllReduce;
  std::int32_t axis = -1;
  std::int64_t bytes = 0;
  friend bool operator==(const CommCall&, const CommCall&) = default;
};

std::ostream& operator<<(std::ostream& os, const CommCall& c) {
  return os << to_string(c.stream) << "/" << to_string(c.kind) << "/axis " << c.axis << "/"
            << c.bytes << " B";
}

// Forwards every call to the real communicator of one mesh axis and logs it first.
class CountingCommunicator final : public exec::Communicator {
 public:
  CountingCommunicator(exec::Communicator* inner, std::int32_t axis, std::mutex* mu,
                       std::vector<CommCall>* log)
      : inner_(inner), axis_(axis), mu_(mu), log_(log) {}

  std::int64_t rank() const override { return inner_->rank(); }
  std::int64_t size() const override { return inner_->size(); }
  const std::string& axis_name() const override { return inner_->axis_name(); }

  Status all_gather_v(StreamKind stream, DType dtype, const void* send,
                      std::span<const std::int64_t> counts, void* recv) override {
    log(stream, OpKind::kAllGather, own(counts) * dtype_bytes(dtype));
    return inner_->all_gather_v(stream, dtype, send, counts, recv);
  }
  Status reduce_scatter_v(StreamKind stream, DType dtype, const void* send,
                          std::span<const std::int64_t> counts, void* recv) override {
    log(stream, OpKind::kReduceScatter, own(counts) * dtype_bytes(dtype));
    return inner_->reduce_scatter_v(stream, dtype, send, counts, recv);
  }
  Status all_reduce(StreamKind stream, DType dtype, void* buf, std::int64_t count) override {
    log(stream, OpKind::kAllReduce, count * dtype_bytes(dtype));
    return inner_->all_reduce(stream, dtype, buf, count);
  }
  // The IR counts an all-to-all by its member's whole send buffer.
  Status all_to_all(StreamKind stream, DType dtype, const void* send, std::int64_t count,
                    void* recv) override {
    log(stream, OpKind::kAllToAll, count * size() * dtype_bytes(dtype));
    return inner_->all_to_all(stream, dtype, send, count, recv);
  }

 private:
  std::int64_t own(std::span<const std::int64_t> counts) const {
    const std::int64_t r = rank();
    return r >= 0 && static_cast<std::size_t>(r) < counts.size()
               ? counts[static_cast<std::size_t>(r)]
               : -1;
  }
  void log(StreamKind stream, OpKind kind, std::int64_t bytes) {
    const std::lock_guard<std::mutex> lock(*mu_);
    log_->push_back(CommCall{stream, kind, axis_, bytes});
  }

  exec::Communicator* inner_;
  std::int32_t axis_;
  std::mutex* mu_;
  std::vector<CommCall>* log_;
};

class CountingCommunicatorSet final : public exec::CommunicatorSet {
 public:
  explicit CountingCommunicatorSet(std::unique_ptr<exec::CommunicatorSet> inner)
      : inner_(std::move(inner)) {
    for (std::int64_t a = 0; a < inner_->num_axes(); ++a) {
      axes_.push_back(std::make_unique<CountingCommunicator>(
          &inner_->axis(a), static_cast<std::int32_t>(a), &mu_, &log_));
    }
  }
  std::int64_t num_axes() const override { return inner_->num_axes(); }
  exec::Communicator& axis(std::int64_t mesh_axis) override {
    return *axes_[static_cast<std::size_t>(mesh_axis)];
  }
  void abort(const Error& error) override { inner_->abort(error); }
  // The calls logged since the last take().
  std::vector<CommCall> take() {
    const std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(log_, {});
  }

 private:
  std::unique_ptr<exec::CommunicatorSet> inner_;
  std::vector<std::unique_ptr<CountingCommunicator>> axes_;
  std::mutex mu_;
  std::vector<CommCall> log_;
};

// What one rank of the real backend did.
struct RankRun {
  std::vector<exec::OpTiming> timeline;
  std::vector<exec::ArenaRecord> arena;
  std::vector<std::vector<CommCall>> calls;  // per step
};

Expected<RankRun> run_rank(const exec::TrainSetup& setup, const exec::TrainSpec& spec,
                           std::int64_t rank, cpu::InProcessWorld& world) {
  CountingCommunicatorSet comms(world.communicators(rank));
  cpu::CpuDevice device(str_cat("rank ", rank));
  FSDP_TRY(std::unique_ptr<backend::HostDecoder> decoder,
           cross::make_rank_decoder(setup, spec, rank));
  FSDP_TRY(const backend::ParamValues initial, cross::rank_initial(setup, spec, rank));
  exec::ExecutorOptions options;
  options.optimizer = spec.optimizer;
  options.hyper = spec.hyper;
  FSDP_TRY(
      std::unique_ptr<exec::Executor> executor,
      exec::Executor::make(setup.schedule, rank, initial, decoder.get(), &device, &comms, options));
  RankRun run;
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    FSDP_RETURN_IF_ERROR(executor->run_step(step));
    run.calls.push_back(comms.take());
  }
  run.timeline = executor->op_timeline();
  run.arena = device.arena().log();
  return run;
}

// Both executions of one generated spec.
struct Observed {
  exec::TrainSpec spec;
  exec::TrainSetup setup;
  std::vector<RankRun> ranks;
  sim::SimResult sim;
};

Observed observe() {
  const exec::TrainSpec spec = *gen::train_spec();
  auto setup = exec::prepare_training(spec);
  if (!setup) {
    RC_FAIL(str_cat("prepare_training: ", setup.error().message()));
  }
  sim::SimOptions options;
  options.record_ops = true;
  auto simulated = sim::simulate(setup->schedule, find_hardware_preset("h100").value(), options);
  if (!simulated) {
    RC_FAIL(str_cat("simulate: ", simulated.error().message()));
  }
  const std::int64_t n = setup->config.mesh().size();
  auto world = cpu::InProcessWorld::make(
      setup->config.mesh(),
      std::chrono::milliseconds(static_cast<std::int64_t>(spec.timeout_s * 1000.0)));
  RC_ASSERT(world.has_value());
  auto results = cross::run_rank_threads<RankRun>(
      n, [&](std::int64_t r) { return run_rank(*setup, spec, r, **world); });
  Observed out{spec, std::move(*setup), {}, std::move(*simulated)};
  for (std::int64_t r = 0; r < n; ++r) {
    auto& result = results[static_cast<std::size_t>(r)];
    if (!result) {
      RC_FAIL(str_cat("rank ", r, ": ", result.error().message()));
    }
    out.ranks.push_back(std::move(*result));
  }
  // Without stragglers the simulator's class c is program c.
  RC_ASSERT(out.sim.classes.size() == out.setup.schedule.programs().size());
  return out;
}

std::int32_t class_of(const Observed& o, std::int64_t rank) {
  const std::int32_t c = o.setup.schedule.rank_class()[static_cast<std::size_t>(rank)];
  RC_ASSERT(o.sim.classes[static_cast<std::size_t>(c)].program == c);
  return c;
}

const Op& op_of(const Observed& o, std::int64_t rank, std::int32_t op) {
  return o.setup.schedule.program_of_rank(rank).ops[static_cast<std::size_t>(op)];
}

template <typename T>
std::string join(const std::vector<T>& v) {
  std::ostringstream os;
  for (std::size_t i = 0; i < v.size(); ++i) {
    os << (i == 0 ? "" : ", ") << v[i];
  }
  return os.str();
}

template <typename T>
void assert_same(const std::vector<T>& real, const std::vector<T>& simulated,
                 const std::string& what) {
  if (real != simulated) {
    RC_FAIL(str_cat(what, ": backend [", join(real), "] != simulator [", join(simulated), "]"));
  }
}

StreamKind stream_at(int s) { return static_cast<StreamKind>(s); }

RC_GTEST_PROP(AgreementProps, EveryRankRunsTheSimulatorsOpsOnEveryStream, ()) {
  const Observed o = observe();
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(o.ranks.size()); ++r) {
    const std::int32_t c = class_of(o, r);
    for (int s = 0; s < kNumStreams; ++s) {
      std::vector<std::int32_t> simulated;
      for (const sim::OpRecord& rec : o.sim.op_log) {
        if (rec.cls == c && rec.stream == stream_at(s)) {
          simulated.push_back(rec.op);
        }
      }
      for (std::int64_t step = 0; step < o.spec.steps; ++step) {
        std::vector<std::int32_t> real;
        for (const exec::OpTiming& t : o.ranks[static_cast<std::size_t>(r)].timeline) {
          if (t.step == step && t.stream == stream_at(s)) {
            real.push_back(t.op);
          }
        }
        assert_same(real, simulated,
                    str_cat("rank ", r, " step ", step, " stream ", to_string(stream_at(s)),
                            " ops"));
      }
    }
  }
}

RC_GTEST_PROP(AgreementProps, EveryCollectiveMovesTheSameBytesInBoth, ()) {
  const Observed o = observe();
  const std::int64_t ndim = o.setup.config.mesh().ndim();
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(o.ranks.size()); ++r) {
    const std::int32_t c = class_of(o, r);
    std::array<std::vector<CommCall>, kNumStreams> simulated;
    for (const sim::OpRecord& rec : o.sim.op_log) {
      const Op& op = op_of(o, r, rec.op);
      if (rec.cls == c && is_collective(op.kind)) {
        simulated[static_cast<std::size_t>(rec.stream)].push_back(
            CommCall{rec.stream, op.kind, op.axis, op.bytes});
      }
    }
    for (std::int64_t step = 0; step < o.spec.steps; ++step) {
      std::array<std::vector<CommCall>, kNumStreams> real;
      for (const CommCall& call : o.ranks[static_cast<std::size_t>(r)].calls[static_cast<std::size_t>(step)]) {
        real[static_cast<std::size_t>(call.stream)].push_back(call);
      }
      // After the program the executor all-reduces the step loss (one fp32) over every mesh
      // axis on the compute stream; that is not an op of the IR.
      std::vector<CommCall>& compute = real[static_cast<std::size_t>(StreamKind::kCompute)];
      RC_ASSERT(static_cast<std::int64_t>(compute.size()) >= ndim);
      for (std::int64_t a = 0; a < ndim; ++a) {
        const CommCall loss{StreamKind::kCompute, OpKind::kAllReduce, static_cast<std::int32_t>(a),
                            4};
        RC_ASSERT(compute[compute.size() - static_cast<std::size_t>(ndim - a)] == loss);
      }
      compute.resize(compute.size() - static_cast<std::size_t>(ndim));
      for (int s = 0; s < kNumStreams; ++s) {
        assert_same(real[static_cast<std::size_t>(s)], simulated[static_cast<std::size_t>(s)],
                    str_cat("rank ", r, " step ", step, " stream ", to_string(stream_at(s)),
                            " collectives"));
      }
    }
  }
}

// One allocation or release: op index, alloc?, bytes, buffer class.
struct MemEvent {
  std::int32_t op = 0;
  bool alloc = true;
  std::int64_t bytes = 0;
  BufferClass cls = BufferClass::kUnshardedWeights;
  friend bool operator==(const MemEvent&, const MemEvent&) = default;
};

std::ostream& operator<<(std::ostream& os, const MemEvent& e) {
  return os << "op " << e.op << (e.alloc ? " +" : " -") << e.bytes << " " << to_string(e.cls);
}

RC_GTEST_PROP(AgreementProps, ArenaMatchesTheSimulatedMemoryEveryStep, ()) {
  const Observed o = observe();
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(o.ranks.size()); ++r) {
    const std::int32_t c = class_of(o, r);
    const sim::MemoryResult& m = o.sim.classes[static_cast<std::size_t>(c)].memory;
    // The simulator: per stream, in its execution order.
    std::array<std::vector<MemEvent>, kNumStreams> simulated;
    for (const sim::OpRecord& rec : o.sim.op_log) {
      const Op& op = op_of(o, r, rec.op);
      if (rec.cls == c && (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree)) {
        const bool alloc = op.kind == OpKind::kAlloc;
        const bool signed_right = alloc ? rec.memory_delta >= 0 : rec.memory_delta <= 0;
        RC_ASSERT(signed_right);
        simulated[static_cast<std::size_t>(rec.stream)].push_back(
            MemEvent{rec.op, op.kind == OpKind::kAlloc,
                     rec.memory_delta < 0 ? -rec.memory_delta : rec.memory_delta,
                     op.buffer_class});
      }
    }
    // The simulator returns to the resident level after its step.
    RC_ASSERT(m.end_bytes == m.resident_bytes);
    const auto& arena = o.ranks[static_cast<std::size_t>(r)].arena;
    for (std::int64_t step = 0; step < o.spec.steps; ++step) {
      std::array<std::vector<MemEvent>, kNumStreams> real;
      std::array<std::int64_t, kNumBufferClasses> live{};
      std::array<std::int64_t, kNumBufferClasses> high{};
      std::int64_t live_total = 0;
      for (const exec::ArenaRecord& rec : arena) {
        if (rec.step != step) {
          continue;
        }
        const Op& op = op_of(o, r, rec.op);
        real[static_cast<std::size_t>(op.stream)].push_back(
            MemEvent{rec.op, rec.is_alloc, rec.bytes, rec.buffer_class});
        const std::size_t k = static_cast<std::size_t>(rec.buffer_class);
        live[k] += rec.is_alloc ? rec.bytes : -rec.bytes;
        high[k] = std::max(high[k], live[k]);
        live_total = rec.live_bytes;
      }
      for (int s = 0; s < kNumStreams; ++s) {
        assert_same(real[static_cast<std::size_t>(s)], simulated[static_cast<std::size_t>(s)],
                    str_cat("rank ", r, " step ", step, " stream ", to_string(stream_at(s)),
                            " allocations"));
      }
      // Transient memory is back at zero after every step.
      RC_ASSERT(live_total == 0);
      for (std::size_t k = 0; k < kNumBufferClasses; ++k) {
        const std::int64_t predicted = m.high_water_by_class[k] - m.resident_by_class[k];
        if (high[k] != predicted) {
          RC_FAIL(str_cat("rank ", r, " step ", step, " ", to_string(static_cast<BufferClass>(k)),
                          " high-water: backend ", high[k], " B, simulator ", predicted, " B"));
        }
      }
    }
  }
}

}  // namespace
}  // namespace fsdp
