// SPDX-License-Identifier: Apache-2.0
#include "sim/report/step_metrics.h"

#include <algorithm>
#include <limits>

#include "core/base/checked_math.h"
#include "core/mesh/placements.h"

namespace fsdp::sim {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// An nn.Embedding table of the importer's naming (core/model/hub_config.cc): token embeddings
// and GPT-2's learned positions.
bool embedding_table(const std::string& name) {
  return ends_with(name, "embed_tokens.weight") || ends_with(name, "wte.weight") ||
         ends_with(name, "wpe.weight");
}

}  // namespace

std::int64_t saturating_mul_add(std::int64_t a, std::int64_t b, std::int64_t c) {
  std::int64_t product = 0;
  std::int64_t sum = 0;
  if (!checked_mul(a, b, &product) || !checked_add(product, c, &sum)) {
    return std::numeric_limits<std::int64_t>::max();
  }
  return sum;
}

bool routed_expert(const std::string& name) { return name.find(".experts.") != std::string::npos; }

ModelFlops model_flops(const Model& whole, const HubArch* arch, std::int64_t seq_len) {
  ModelFlops f;
  const double t = static_cast<double>(seq_len);
  if (arch == nullptr) {
    f.convention = "model file";
    f.active_parameters = whole.flops().matmul / 2;
    f.attention_per_token = 3.0 * static_cast<double>(whole.flops().attention_per_seq) * t;
    f.per_token = 3.0 * static_cast<double>(whole.flops().matmul) + f.attention_per_token;
    return f;
  }
  f.convention = "torchtitan";
  std::int64_t dense = 0;
  std::int64_t routed = 0;
  for (const Unit& unit : whole.units()) {
    for (const Param& p : unit.params()) {
      if (embedding_table(p.name()) && !(arch->tied && !ends_with(p.name(), "wpe.weight"))) {
        continue;
      }
      (routed_expert(p.name()) ? routed : dense) += p.numel();
    }
  }
  // Routed experts count top_k of every `experts` (an integer: the routed tensors come in
  // `experts` equal sets per layer).
  const std::int64_t routed_active =
      arch->experts > 0 ? static_cast<std::int64_t>(static_cast<double>(routed) *
                                                    static_cast<double>(arch->top_k) /
                                                    static_cast<double>(arch->experts))
                        : routed;
  f.active_parameters = dense + routed_active;
  const double attended = arch->sliding_window > 0
                              ? static_cast<double>(std::min(seq_len, arch->sliding_window))
                              : t;
  f.attention_per_token = 3.0 * static_cast<double>(whole.flops().attention_per_seq) * attended;
  f.per_token = 6.0 * static_cast<double>(f.active_parameters) + f.attention_per_token;
  return f;
}

Throughput throughput_of(const Schedule& schedule, double step_time_s, const ModelFlops& flops,
                         const Hardware& hardware) {
  Throughput t;
  const DeviceMesh& mesh = schedule.mesh();
  std::int64_t tp = 1;
  if (const auto a = mesh.axis_index(kTensorParallelAxis)) {
    tp = mesh.axis_size(*a);
  }
  t.data_ranks = mesh.size() / tp;
  const Workload& w = schedule.workload();
  t.tokens_per_step = saturating_mul_add(
      saturating_mul_add(t.data_ranks, schedule.num_microbatches(), 0),
      saturating_mul_add(w.micro_batch_size, w.seq_len, 0), 0);
  t.step_time_s = step_time_s;
  if (step_time_s > 0) {
    t.tokens_per_second_per_gpu = static_cast<double>(t.tokens_per_step) / step_time_s /
                                  static_cast<double>(mesh.size());
  }
  const double flops_per_s = flops.per_token * t.tokens_per_second_per_gpu;
  t.tflops_per_gpu = flops_per_s * 1e-12;
  t.mfu = hardware.peak_bf16_flops() > 0
              ? flops_per_s / static_cast<double>(hardware.peak_bf16_flops())
              : 0.0;
  return t;
}

MemoryVerdict memory_verdict(const sim::SimResult& result, const Hardware& hardware) {
  MemoryVerdict v;
  v.device_bytes = hardware.memory_bytes();
  std::int64_t worst = 0;
  for (const sim::ClassResult& c : result.classes) {
    const sim::MemoryResult& m = c.memory;
    v.peak_reserved_bytes = std::max(v.peak_reserved_bytes, m.peak_reserved_bytes);
    v.peak_allocated_bytes = std::max(v.peak_allocated_bytes, m.peak_bytes);
    v.outside_allocator_bytes =
        std::max(v.outside_allocator_bytes, m.runtime_outside_allocator_bytes);
    worst = std::max(worst, saturating_mul_add(1, m.peak_reserved_bytes,
                                               m.runtime_outside_allocator_bytes));
  }
  v.headroom_bytes = v.device_bytes - worst;
  // result.fits is the engine's verdict per class (the same rule, with the allocated bytes too);
  // the headroom states it in bytes.
  v.fits = result.fits && v.headroom_bytes >= 0;
  return v;
}

}  // namespace fsdp::sim
