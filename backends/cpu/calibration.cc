// SPDX-License-Identifier: Apache-2.0
// Each figure is the median of `repeats` rounds on every rank at once (barriers line the rounds
// up under MPI), so the cores are shared as they are in training; docs/design/fidelity.md gives
// the formulas that turn the timings into the calibration's rates.
#include "backends/cpu/calibration.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <utility>

#include "backends/cpu/cpu_device.h"
#include "backends/model/kernels.h"
#include "core/base/strings.h"
#include "core/schedule/schedule_builder.h"

namespace fsdp::cpu {
namespace {

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0.0;
  }
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

// The ranks measure together: a barrier under MPI, nothing otherwise.
// Every meeting has the --timeout deadline (MpiSession::arrive): a rank that stalls is named
// and the job ends, instead of the others waiting forever (issue 16, class 5).
class Group {
 public:
  Group(const MpiSession* session, double timeout_s)
      : mpi_(session != nullptr && session->size() > 1), session_(session), timeout_s_(timeout_s) {}
  bool mpi() const { return mpi_; }
  void barrier() const {
    if (mpi_) {
      meet();
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  double mean(double v) const { return mpi_ ? reduce(v, MPI_SUM) / size() : v; }
  double max(double v) const { return reduce(v, MPI_MAX); }

 private:
  double size() const {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return static_cast<double>(n);
  }
  double reduce(double v, MPI_Op op) const {
    if (!mpi_) {
      return v;
    }
    meet();
    double out = v;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return out;
  }
  // arrive() either returns ok or ends the job; an invalid timeout was refused before.
  void meet() const { (void)session_->arrive("a calibration round", timeout_s_); }
  bool mpi_;
  const MpiSession* session_;
  double timeout_s_;
};

// The median over `repeats` rounds of fn()'s seconds, rounds lined up across ranks.
template <class Fn>
double time_rounds(const Group& group, std::int64_t repeats, Fn&& fn) {
  std::vector<double> times;
  for (std::int64_t r = 0; r < repeats; ++r) {
    group.barrier();
    const double t0 = now_s();
    fn();
    times.push_back(now_s() - t0);
  }
  return median(std::move(times));
}

std::int64_t rate(double amount, double seconds) {
  return std::max<std::int64_t>(1, std::llround(amount / std::max(seconds, 1e-12)));
}

Status check_options(const CpuCalibrationOptions& o) {
  if (o.repeats < 1 || o.repeats > kMaxCalibrationRepeats) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("repeats is ", o.repeats, "; expected a value in [1, ",
                         kMaxCalibrationRepeats, "]"));
  }
  if (o.collective_iters < 1 || o.collective_iters > kMaxCalibrationIters) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("collective iterations is ", o.collective_iters,
                         "; expected a value in [1, ", kMaxCalibrationIters, "]"));
  }
  for (std::int64_t b : o.collective_bytes) {
    if (b < 4 || b % 4 != 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("collective payload is ", b,
                           " bytes; expected a positive multiple of 4 (fp32 elements)"));
    }
  }
  return ok_status();
}

// FLOPs the IR gives the rank's microbatch-0 compute ops, per (kind, unit).
std::map<std::pair<OpKind, std::int32_t>, std::int64_t> unit_flops(const RankProgram& program) {
  std::map<std::pair<OpKind, std::int32_t>, std::int64_t> out;
  for (const Op& op : program.ops) {
    if ((op.kind == OpKind::kForward || op.kind == OpKind::kBackward ||
         op.kind == OpKind::kRecompute) &&
        op.microbatch <= 0) {
      out[{op.kind, op.unit}] += op.flops;
    }
  }
  return out;
}

// Forward, backward and (with recompute) recompute of every unit on microbatch 0: the effective
// FLOP/s of each kind, sum of the IR's FLOPs over sum of the median unit times.
Expected<std::vector<ComputeRate>> measure_decoder(const exec::TrainSpec& spec,
                                                   const exec::TrainSetup& setup, std::int64_t rank,
                                                   const Group& group, std::int64_t repeats) {
  const std::int64_t world = setup.config.mesh().size();
  FSDP_TRY(std::unique_ptr<backend::HostDecoder> decoder,
           backend::HostDecoder::make(spec.model, spec.microbatches, rank, world));
  const auto units = static_cast<std::int32_t>(setup.model.num_units());
  exec::set_decoder_recompute(setup, *decoder);
  const std::vector<UnitCheckpoint> checkpoints =
      checkpoints_of(setup.config.recompute(), setup.model, /*compiled=*/false);
  backend::ParamValues values = backend::initial_parameters(spec.model);
  std::vector<std::vector<const float*>> params(idx(units));
  std::vector<std::vector<std::vector<float>>> grad_values(idx(units));
  std::vector<std::vector<float*>> grads(idx(units));
  for (std::size_t u = 0; u < idx(units); ++u) {
    for (std::vector<float>& p : values[u]) {
      params[u].push_back(p.data());
      grad_values[u].emplace_back(p.size());
      grads[u].push_back(grad_values[u].back().data());
    }
  }
  std::map<std::pair<OpKind, std::int32_t>, std::vector<double>> times;
  const auto timed = [&](OpKind kind, std::int32_t u, const auto& fn) {
    const double t0 = now_s();
    fn();
    times[{kind, u}].push_back(now_s() - t0);
  };
  for (std::int64_t r = 0; r < repeats; ++r) {
    group.barrier();
    decoder->begin_step(0);
    for (std::int32_t u = 0; u < units; ++u) {
      timed(OpKind::kForward, u, [&] { decoder->forward(u, 0, params[idx(u)]); });
    }
    for (std::int32_t u = units - 1; u >= 0; --u) {
      if (checkpoints[idx(u)].recomputed) {
        timed(OpKind::kRecompute, u, [&] { decoder->recompute(u, 0, params[idx(u)]); });
      }
      timed(OpKind::kBackward, u,
            [&] { decoder->backward(u, 0, params[idx(u)], grads[idx(u)]); });
    }
  }
  const auto flops = unit_flops(setup.schedule.program_of_rank(rank));
  std::vector<ComputeRate> out;
  for (const OpKind kind : {OpKind::kForward, OpKind::kBackward, OpKind::kRecompute}) {
    double seconds = 0.0;
    double total_flops = 0.0;
    for (const auto& [key, samples] : times) {
      if (key.first == kind) {
        seconds += median(samples);
        const auto it = flops.find(key);
        total_flops += it == flops.end() ? 0.0 : static_cast<double>(it->second);
      }
    }
    seconds = group.mean(seconds);
    if (total_flops > 0.0) {
      out.push_back(ComputeRate{kind, rate(total_flops, seconds), 0});
    }
  }
  return out;
}

// memcpy of a buffer well beyond the caches: bytes read plus bytes written per second.
double measure_copy(const Group& group, std::int64_t repeats) {
  constexpr std::size_t kFloats = std::size_t{8} << 20;  // 32 MiB
  std::vector<float> src(kFloats, 1.0F);
  std::vector<float> dst(kFloats, 0.0F);
  const double t = time_rounds(group, repeats, [&] {
    std::memcpy(dst.data(), src.data(), kFloats * sizeof(float));
  });
  return group.mean(2.0 * static_cast<double>(kFloats * sizeof(float)) / std::max(t, 1e-12));
}

// The optimizer update over this rank's optimizer elements (the IR's optimizer-step ops).
ComputeRate measure_optimizer(const exec::TrainSpec& spec, const exec::TrainSetup& setup,
                              std::int64_t rank, const Group& group, std::int64_t repeats) {
  double flops = 0.0;
  for (const Op& op : setup.schedule.program_of_rank(rank).ops) {
    if (op.kind == OpKind::kOptimizerStep) {
      flops += static_cast<double>(op.flops);
    }
  }
  const auto per_element =
      static_cast<double>(optimizer_flops_per_element(setup.config.optimizer()));
  const auto n = static_cast<std::size_t>(std::max(1.0, flops / per_element));
  std::vector<float> weights(n, 0.5F);
  std::vector<float> grads(n, 0.25F);
  std::vector<float> state(n * idx(setup.config.optimizer().num_states()), 0.0F);
  std::int64_t step = 0;
  const double t = time_rounds(group, repeats, [&] {
    backend::optimizer_update(spec.optimizer, spec.hyper, ++step, weights, grads, state);
  });
  return ComputeRate{OpKind::kOptimizerStep,
                     rate(static_cast<double>(n) * per_element, group.mean(t)), 0};
}

// sgemm at the decoder's shapes (forward, input-grad and weight-grad products; for the Llama
// network also its attention projections).
std::vector<MatmulRate> measure_matmuls(const backend::DecoderConfig& m, const Group& group,
                                        std::int64_t repeats) {
  const std::int64_t t = m.seq_len * m.micro_batch_size;
  std::vector<std::array<std::int64_t, 3>> shapes = {
      {t, m.ffn, m.hidden}, {t, m.hidden, m.ffn}, {t, m.vocab, m.hidden},
      {m.ffn, m.hidden, t}, {m.hidden, m.ffn, t}, {m.vocab, m.hidden, t}};
  if (m.family == backend::DecoderFamily::kLlama) {
    const std::int64_t q = m.heads * m.head_dim;
    const std::int64_t kv = m.kv_heads * m.head_dim;
    shapes.insert(shapes.end(), {{t, q, m.hidden}, {t, kv, m.hidden}, {t, m.hidden, q},
                                 {q, m.hidden, t}, {kv, m.hidden, t}});
  }
  std::vector<MatmulRate> out;
  for (const auto& s : shapes) {
    MatmulRate r{s[0], s[1], s[2], 1};
    const bool seen = std::any_of(out.begin(), out.end(), [&](const MatmulRate& o) {
      return o.m == r.m && o.n == r.n && o.k == r.k;
    });
    if (seen) {
      continue;
    }
    std::vector<float> a(idx(s[0] * s[2]), 0.5F);
    std::vector<float> b(idx(s[2] * s[1]), 0.25F);
    std::vector<float> c(idx(s[0] * s[1]), 0.0F);
    const double sec = time_rounds(group, repeats, [&] {
      backend::matmul(false, false, s[0], s[1], s[2], a.data(), b.data(), 0.0F, c.data());
    });
    r.flops_per_s = rate(2.0 * static_cast<double>(s[0] * s[1] * s[2]), group.mean(sec));
    out.push_back(r);
  }
  return out;
}

// 4 KiB x 4^k below the largest payload of any rank (ranks agree: every rank runs the list).
std::vector<std::int64_t> default_sizes(const Schedule& schedule, std::int64_t rank,
                                        const Group& group) {
  std::int64_t largest = 4096;
  for (const Op& op : schedule.program_of_rank(rank).ops) {
    if (is_collective(op.kind)) {
      largest = std::max(largest, op.bytes);
    }
  }
  largest = std::llround(group.max(static_cast<double>((largest + 3) / 4 * 4)));
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = 4096; b < largest; b *= 4) {
    sizes.push_back(b);
  }
  sizes.push_back(largest);
  return sizes;
}

// One collective call of `kind` moving `bytes` per member on the axis-0 communicator, as a task
// on the stream the executor uses.
struct CollectiveBench {
  exec::Communicator* comm;
  CpuDevice* device;
  std::vector<float> small;
  std::vector<float> large;
  std::vector<std::int64_t> counts;

  void resize(std::int64_t bytes) {
    const std::int64_t n = comm->size();
    counts.assign(idx(n), bytes / 4);
    small.assign(idx(bytes / 4), 1.0F);
    large.assign(idx(n * bytes / 4), 1.0F);
  }
  void submit(OpKind kind) {
    const StreamKind stream =
        kind == OpKind::kAllGather ? StreamKind::kAllGather : StreamKind::kReduceScatter;
    device->submit(stream, {}, [this, kind, stream]() -> Status {
      switch (kind) {
        case OpKind::kAllGather:
          return comm->all_gather_v(stream, DType::kFp32, small.data(), counts, large.data());
        case OpKind::kReduceScatter:
          return comm->reduce_scatter_v(stream, DType::kFp32, large.data(), counts, small.data());
        default:
          return comm->all_reduce(stream, DType::kFp32, small.data(),
                                  static_cast<std::int64_t>(small.size()));
      }
    });
  }
};

Expected<std::vector<CollectiveCurve>> measure_collectives(CollectiveBench& bench,
                                                           const std::vector<std::int64_t>& sizes,
                                                           std::int64_t iters, const Group& group,
                                                           const CalibrationLog& log) {
  std::vector<CollectiveCurve> curves;
  for (const OpKind kind : {OpKind::kAllGather, OpKind::kReduceScatter, OpKind::kAllReduce}) {
    CollectiveCurve curve{kind, bench.comm->size(), {}};
    for (std::int64_t bytes : sizes) {
      bench.resize(bytes);
      bench.submit(kind);  // warm-up
      FSDP_RETURN_IF_ERROR(bench.device->synchronize());
      group.barrier();
      const double t0 = now_s();
      for (std::int64_t i = 0; i < iters; ++i) {
        bench.submit(kind);
      }
      FSDP_RETURN_IF_ERROR(bench.device->synchronize());
      const double per_call = group.max(now_s() - t0) / static_cast<double>(iters);
      curve.points.push_back(CollectivePoint{bytes, std::llround(per_call * 1e9)});
    }
    if (log) {
      log(str_cat("  ", to_string(kind), ": ", curve.points.front().ns / 1000, " us at ",
                  curve.points.front().bytes, " B .. ", curve.points.back().ns / 1000, " us at ",
                  curve.points.back().bytes, " B per member"));
    }
    curves.push_back(std::move(curve));
  }
  return curves;
}

// The first layer-sized matmul alone and while all-gathers of `bytes` run on the same rank (all
// ranks at once, as in training): the ratio of the two times, in thousandths.
Expected<std::int64_t> measure_slowdown(CollectiveBench& bench, const backend::DecoderConfig& m,
                                        std::int64_t bytes, std::int64_t ag_ns,
                                        const Group& group, std::int64_t repeats) {
  const std::int64_t t = m.seq_len * m.micro_batch_size;
  std::vector<float> a(idx(t * m.hidden), 0.5F);
  std::vector<float> b(idx(m.hidden * m.ffn), 0.25F);
  std::vector<float> c(idx(t * m.ffn), 0.0F);
  const auto kernel = [&] {
    for (int i = 0; i < 4; ++i) {
      backend::matmul(false, false, t, m.ffn, m.hidden, a.data(), b.data(), 0.0F, c.data());
    }
  };
  const double alone = time_rounds(group, repeats, kernel);
  // Enough all-gathers to outlast the slowed kernel; every rank issues the same count.
  const double ag_s = std::max(1e-9, 1e-9 * static_cast<double>(ag_ns));
  const double calls = group.max(std::ceil(3.0 * alone / ag_s)) + 1.0;
  bench.resize(bytes);
  std::vector<double> with;
  for (std::int64_t r = 0; r < repeats; ++r) {
    group.barrier();
    for (double i = 0; i < calls; i += 1.0) {
      bench.submit(OpKind::kAllGather);
    }
    const double t0 = now_s();
    kernel();
    with.push_back(now_s() - t0);
    FSDP_RETURN_IF_ERROR(bench.device->synchronize());
  }
  const double ratio = group.mean(median(std::move(with)) / std::max(alone, 1e-12));
  return std::clamp<std::int64_t>(std::llround(1000.0 * ratio), 1000, 100000);
}

std::int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : std::int64_t{1} << 30;
}

}  // namespace

Expected<Hardware> calibrate_cpu(const CpuCalibrationOptions& options, const MpiSession* session,
                                 const CalibrationLog& log) {
  FSDP_RETURN_IF_ERROR(check_options(options));
  FSDP_TRY(const exec::TrainSetup setup, exec::prepare_training(options.spec));
  const std::int64_t world = setup.config.mesh().size();
  const std::int64_t rank = session != nullptr ? session->rank() : 0;
  if (session != nullptr && session->size() != world) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("mpirun started ", session->size(), " ranks; the mesh ",
                         options.spec.mesh, " has ", world));
  }
  const Group group(session, options.spec.timeout_s);
  const CalibrationLog say = [&](const std::string& line) {
    if (log && rank == 0) {
      log(line);
    }
  };
  backend::use_single_threaded_blas();
  Calibration c;
  c.ranks = group.mpi() ? world : 1;
  say("measuring memory copy");
  c.copy_bytes_per_s = rate(measure_copy(group, options.repeats), 1.0);
  say(str_cat("  ", c.copy_bytes_per_s / 1'000'000, " MB/s (read + write)"));
  say("measuring the decoder's forward and backward at the configuration's shapes");
  FSDP_TRY(c.compute, measure_decoder(options.spec, setup, rank, group, options.repeats));
  c.compute.push_back(measure_optimizer(options.spec, setup, rank, group, options.repeats));
  c.compute.push_back(ComputeRate{OpKind::kGradCopy, 0, c.copy_bytes_per_s});
  c.compute.push_back(ComputeRate{OpKind::kCast, 0, c.copy_bytes_per_s});
  for (const ComputeRate& r : c.compute) {
    say(str_cat("  ", to_string(r.kind), ": ", r.flops_per_s / 1'000'000, " MFLOP/s, ",
                r.bytes_per_s / 1'000'000, " MB/s"));
  }
  say("measuring sgemm at the model's matmul shapes");
  c.matmuls = measure_matmuls(options.spec.model, group, options.repeats);
  std::int64_t peak = 1;
  for (const MatmulRate& m : c.matmuls) {
    peak = std::max(peak, m.flops_per_s);
  }
  HardwareSpec spec;
  spec.name = options.name;
  spec.devices_per_node = std::max<std::int64_t>(1, c.ranks);
  spec.memory_bytes = std::max<std::int64_t>(1, physical_memory_bytes() / spec.devices_per_node);
  spec.peak_bf16_flops = peak;
  spec.peak_fp32_flops = peak;
  spec.hbm_bytes_per_s = c.copy_bytes_per_s;
  spec.intra_node_bytes_per_s = c.copy_bytes_per_s;
  spec.intra_node_latency_ns = 1000;
  if (group.mpi()) {
    std::vector<MeshAxis> axes(1);
    axes[0].name = "world";
    axes[0].size = world;
    FSDP_TRY(const DeviceMesh mesh, DeviceMesh::make(std::move(axes)));
    FSDP_TRY(std::unique_ptr<exec::CommunicatorSet> comms,
             make_mpi_communicators(*session, mesh, options.spec.timeout_s));
    {
      CpuDevice device("calibration");
      CollectiveBench bench{&comms->axis(0), &device, {}, {}, {}};
      const std::vector<std::int64_t> sizes = options.collective_bytes.empty()
                                                  ? default_sizes(setup.schedule, rank, group)
                                                  : options.collective_bytes;
      say(str_cat("measuring all-gather, reduce-scatter and all-reduce on ", world, " ranks, ",
                  sizes.size(), " sizes"));
      FSDP_TRY(c.collectives,
               measure_collectives(bench, sizes, options.collective_iters, group, say));
      const CollectivePoint largest = c.collectives.front().points.back();
      say("measuring compute while all-gathers run");
      FSDP_TRY(c.compute_slowdown_permille,
               measure_slowdown(bench, options.spec.model, largest.bytes, largest.ns, group,
                                options.repeats));
      say(str_cat("  compute takes ", static_cast<double>(c.compute_slowdown_permille) / 1000.0,
                  "x as long"));
      const CollectivePoint smallest = c.collectives.front().points.front();
      spec.intra_node_latency_ns = smallest.ns / (world - 1);
      spec.intra_node_bytes_per_s = rate(static_cast<double>((world - 1) * largest.bytes),
                                         1e-9 * static_cast<double>(largest.ns));
    }
    comms.reset();
  } else {
    say("one process: collectives not measured (run under mpirun for them)");
  }
  spec.inter_node_bytes_per_s = spec.intra_node_bytes_per_s;
  spec.inter_node_latency_ns = spec.intra_node_latency_ns;
  c.source = str_cat("fsdpsim calibrate --backend cpu, ", c.ranks, " rank(s), decoder L",
                     options.spec.model.layers, " H", options.spec.model.hidden, " F",
                     options.spec.model.ffn, " V", options.spec.model.vocab, " tokens ",
                     options.spec.model.seq_len * options.spec.model.micro_batch_size);
  spec.description = str_cat("this machine as the CPU backend sees it (", c.ranks,
                             " rank(s) at once)");
  spec.calibration = std::move(c);
  return Hardware::make(std::move(spec));
}

}  // namespace fsdp::cpu
