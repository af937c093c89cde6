// SPDX-License-Identifier: Apache-2.0
// Helpers for the simulator tests: hand-built schedules (one rank class, or several) and a
// round-numbered hardware description so that closed forms are easy to write down.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/hardware/hardware.h"
#include "core/mesh/device_mesh.h"
#include "core/model/model.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule.h"
#include "core/schedule/schedule_builder.h"

namespace fsdp::sim::testing {

// 8 devices per node, 100 GB memory, 1e15 bf16 FLOP/s, 1e14 fp32, 1e12 B/s HBM,
// 1e11 B/s NVLink with 1 us latency, 1e10 B/s network with 10 us latency.
inline Hardware round_hardware() {
  HardwareSpec spec;
  spec.name = "round";
  spec.devices_per_node = 8;
  spec.memory_bytes = 100'000'000'000;
  spec.peak_bf16_flops = 1'000'000'000'000'000;
  spec.peak_fp32_flops = 100'000'000'000'000;
  spec.hbm_bytes_per_s = 1'000'000'000'000;
  spec.intra_node_bytes_per_s = 100'000'000'000;
  spec.intra_node_latency_ns = 1000;
  spec.inter_node_bytes_per_s = 10'000'000'000;
  spec.inter_node_latency_ns = 10'000;
  return Hardware::make(spec).value();
}

inline Op compute_op(OpKind kind, std::int64_t flops, std::int64_t mem_bytes = 0) {
  Op op;
  op.kind = kind;
  op.stream = StreamKind::kCompute;
  op.flops = flops;
  op.mem_bytes = mem_bytes;
  return op;
}

inline Op sync_op(OpKind kind, StreamKind stream, std::int32_t event) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.event = event;
  return op;
}

inline Op memory_op(OpKind kind, StreamKind stream, std::int32_t buffer, std::int64_t bytes,
                    BufferClass cls = BufferClass::kUnshardedWeights) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.buffer = buffer;
  op.bytes = kind == OpKind::kAlloc ? bytes : 0;
  op.elements = op.bytes;  // one-byte elements: the verifier checks bytes = elements x dtype
  op.dtype = DType::kFp8;
  op.buffer_class = cls;
  return op;
}

inline Op collective_op(OpKind kind, StreamKind stream, std::int64_t elements,
                        std::int32_t collective = 0, std::int32_t axis = 0) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.axis = axis;
  op.collective = collective;
  op.dtype = DType::kBf16;
  op.elements = elements;
  op.bytes = elements * 2;
  return op;
}

inline RankProgram program_of(std::vector<Op> ops, std::int32_t num_events,
                              std::int32_t num_buffers, std::int64_t rep = 0,
                              std::int64_t num_ranks = 1) {
  RankProgram p;
  p.representative_rank = rep;
  p.num_ranks = num_ranks;
  p.ops = std::move(ops);
  p.num_events = num_events;
  p.num_buffers = num_buffers;
  return p;
}

// Gives every collective op without operands its send and receive buffer: an empty resident
// scratch buffer of its own (an all-gather or reduce-scatter reads and writes it, an all-reduce
// reduces it in place), so hand-written programs satisfy the verifier's operand rules without
// ordering collectives that the test means to run concurrently, and simulate as before.
inline void add_scratch_operands(RankProgram* p) {
  for (Op& op : p->ops) {
    if (!is_collective(op.kind) || op.num_operands > 0) {
      continue;
    }
    const auto scratch = static_cast<std::int32_t>(p->resident.size());
    p->resident.push_back(ResidentBuffer{});
    op.first_operand = static_cast<std::int32_t>(p->operands.size());
    if (op.kind == OpKind::kAllReduce) {
      p->operands.push_back(Operand{BufferSpace::kResident, Access::kReadWrite, Extent::kNone,
                                    scratch, -1});
    } else {
      p->operands.push_back(
          Operand{BufferSpace::kResident, Access::kRead, Extent::kNone, scratch, -1});
      p->operands.push_back(
          Operand{BufferSpace::kResident, Access::kWrite, Extent::kNone, scratch, -1});
    }
    op.num_operands = static_cast<std::int32_t>(p->operands.size()) - op.first_operand;
  }
}

// The collectives table of hand-written programs: entry k takes the kind, axis and dtype of the
// first op that names collective k.
inline std::vector<CollectiveInfo> collectives_of(const std::vector<RankProgram>& programs) {
  std::vector<CollectiveInfo> table;
  std::vector<bool> seen;
  for (const RankProgram& p : programs) {
    for (const Op& op : p.ops) {
      if (!is_collective(op.kind) || op.collective < 0) {
        continue;
      }
      const auto k = static_cast<std::size_t>(op.collective);
      if (k >= table.size()) {
        table.resize(k + 1);
        seen.resize(k + 1, false);
      }
      if (!seen[k]) {
        table[k].kind = op.kind;
        table[k].axis = op.axis;
        table[k].dtype = op.dtype;
        seen[k] = true;
      }
    }
  }
  return table;
}

// A verified schedule of hand-written programs on `mesh` (rank r runs programs[rank_class[r]]),
// with the collectives table the programs imply, or the verifier's error.
inline Expected<Schedule> try_schedule(const std::string& mesh, std::vector<RankProgram> programs,
                                       std::vector<std::int32_t> rank_class) {
  ScheduleParts parts(parse_device_mesh(mesh).value());
  for (RankProgram& p : programs) {
    add_scratch_operands(&p);
  }
  parts.collectives = collectives_of(programs);
  parts.programs = std::move(programs);
  parts.rank_class = std::move(rank_class);
  parts.unit_names = {"u0"};
  return Schedule::make(std::move(parts));
}

// One program shared by every rank of `mesh`, or the verifier's error.
inline Expected<Schedule> try_single_class(const std::string& mesh, RankProgram program) {
  const DeviceMesh m = parse_device_mesh(mesh).value();
  program.num_ranks = m.size();
  program.representative_rank = 0;
  return try_schedule(mesh, {std::move(program)},
                      std::vector<std::int32_t>(static_cast<std::size_t>(m.size()), 0));
}

// One program shared by every rank of `mesh` (it must verify).
inline Schedule single_class(const std::string& mesh, RankProgram program) {
  return try_single_class(mesh, std::move(program)).value();
}

inline Param weight(std::string name, std::initializer_list<std::int64_t> dims) {
  return Param::make(std::move(name), Shape::make(dims).value(), DType::kBf16, true).value();
}

// `layers` units of one [rows, cols] bf16 weight each, with some FLOPs and activations
// (`activation_bytes` per token, 4 * cols by default).
inline Model layered_model(int layers, std::int64_t rows, std::int64_t cols,
                           std::int64_t activation_bytes = -1) {
  std::vector<Unit> units;
  for (int i = 0; i < layers; ++i) {
    const std::string name = "layer" + std::to_string(i);
    units.push_back(Unit::make(name, Unit::kNoParent, {weight(name + ".w", {rows, cols})},
                               UnitFlops{2 * rows * cols, 0},
                               UnitActivations{activation_bytes < 0 ? 4 * cols : activation_bytes, 0})
                        .value());
  }
  return Model::make("layered", std::move(units)).value();
}

inline Schedule build(const Model& m, const std::string& mesh, FsdpOptions options = {},
                      Strategy strategy = Strategy::kZero3) {
  const FsdpConfig config =
      make_fsdp_config(strategy, parse_device_mesh(mesh).value(), std::move(options)).value();
  return build_schedule(m, config, Workload{}).value();
}

}  // namespace fsdp::sim::testing
