// SPDX-License-Identifier: Apache-2.0
#include "planner/run_options_patch.h"

namespace fsdp::planner {
namespace {

// Every field once, with its CLI option name and its RunOptions member: the one list the three
// functions below walk, so no field can be layered but not applied.
template <class Visit>
void for_each_member(Visit&& visit) {
  using P = RunOptionsPatch;
  using O = RunOptions;
  visit("model", &P::model, &O::model);
  visit("mesh", &P::mesh, &O::mesh);
  visit("strategy", &P::strategy, &O::strategy);
  visit("microbatches", &P::microbatches, &O::microbatches);
  visit("recompute", &P::recompute, &O::recompute);
  visit("main-params", &P::main_params, &O::main_params);
  visit("optimizer", &P::optimizer, &O::optimizer);
  visit("seq-len", &P::seq_len, &O::seq_len);
  visit("micro-batch-size", &P::micro_batch_size, &O::micro_batch_size);
  visit("compile", &P::compile, &O::compile);
  visit("compute-dtype", &P::compute_dtype, &O::compute_dtype);
  visit("kernels", &P::kernels, &O::kernels);
  visit("param-dtype", &P::param_dtype, &O::param_dtype);
  visit("reduce-dtype", &P::reduce_dtype, &O::reduce_dtype);
  visit("fp8-all-gather", &P::fp8_all_gather, &O::fp8_all_gather);
  visit("framework", &P::framework, &O::framework);
  visit("reshard-after-forward", &P::reshard_after_forward, &O::reshard_after_forward);
  visit("sequence-parallel", &P::sequence_parallel, &O::sequence_parallel);
}

}  // namespace

std::vector<std::string> patched_options(const RunOptionsPatch& patch) {
  std::vector<std::string> names;
  for_each_member([&](const char* name, auto patch_member, auto) {
    if ((patch.*patch_member).has_value()) {
      names.emplace_back(name);
    }
  });
  return names;
}

RunOptionsPatch layer(const RunOptionsPatch& base, const RunOptionsPatch& top) {
  RunOptionsPatch out = base;
  for_each_member([&](const char*, auto patch_member, auto) {
    if ((top.*patch_member).has_value()) {
      out.*patch_member = top.*patch_member;
    }
  });
  return out;
}

void apply_patch(const RunOptionsPatch& patch,
                 const std::function<bool(std::string_view option)>& given, RunOptions* options) {
  for_each_member([&](const char* name, auto patch_member, auto options_member) {
    const auto& value = patch.*patch_member;
    if (value.has_value() && !(given && given(name))) {
      options->*options_member = *value;
    }
  });
}

}  // namespace fsdp::planner
