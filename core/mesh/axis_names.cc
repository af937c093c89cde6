// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/axis_names.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/base/strings.h"
#include "core/mesh/placements.h"

namespace fsdp {

namespace {

// Axis names of the frameworks' meshes that fsdpsim has no model for, with what they mean
// (torchtitan's ParallelDims: pp, cp; Megatron-LM's sequence parallelism rides on tp).
constexpr std::pair<std::string_view, std::string_view> kUnmodelledAxes[] = {
    {"pp", "pipeline parallelism"},
    {"cp", "context parallelism"},
    {"sp", "sequence parallelism: --sequence-parallel with a tp axis"},
};

std::string expected_names() {
  std::string out;
  for (const std::string_view name : kDataParallelAxisNames) {
    out += str_cat(name, ", ");
  }
  return str_cat(out, kTensorParallelAxis, " or ", kExpertParallelAxis);
}

}  // namespace

bool is_data_parallel_axis_name(std::string_view name) {
  return std::find(kDataParallelAxisNames.begin(), kDataParallelAxisNames.end(), name) !=
         kDataParallelAxisNames.end();
}

Status check_modelled_axes(const DeviceMesh& mesh) {
  for (std::int64_t a = 0; a < mesh.ndim(); ++a) {
    const std::string& name = mesh.axis_name(a);
    if (is_data_parallel_axis_name(name) || name == kTensorParallelAxis ||
        name == kExpertParallelAxis) {
      continue;
    }
    std::string meaning;
    for (const auto& [known, what] : kUnmodelledAxes) {
      if (name == known) {
        meaning = str_cat(" (", what, ")");
      }
    }
    return Error(ErrorCode::kInvalidArgument, str_cat("axis '", name, "' is not modelled", meaning,
                                                      "; expected ", expected_names()));
  }
  return ok_status();
}

Expected<DeviceMesh> parse_run_mesh(std::string_view text) {
  FSDP_TRY(DeviceMesh mesh, parse_device_mesh(text));
  FSDP_RETURN_IF_ERROR(check_modelled_axes(mesh));
  return mesh;
}

}  // namespace fsdp
