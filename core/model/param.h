// SPDX-License-Identifier: Apache-2.0
// Param: one named parameter tensor of a model unit (shape, dtype, requires_grad). A value type
// built by Param::make, which guarantees a non-empty name and a byte size that fits int64.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/expected.h"
#include "core/layout/shape.h"
#include "core/model/dtype.h"

namespace fsdp {

class Param {
 public:
  // Errors: an empty name or one with a control character (kInvalidArgument); numel x dtype bytes
  // beyond int64 (kOutOfRange). `expert`: a routed expert's tensor of a MoE layer, sharded over the
  // expert-data-parallel axes of an expert-parallel mesh (docs/design/parallelism.md).
  static Expected<Param> make(std::string name, Shape shape, DType dtype, bool requires_grad,
                              bool expert = false);

  // Fully qualified name, e.g. "model.layers.0.self_attn.q_proj.weight".
  const std::string& name() const { return name_; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  bool requires_grad() const { return requires_grad_; }
  bool expert() const { return expert_; }
  std::int64_t numel() const { return shape_.numel(); }
  std::int64_t bytes() const { return bytes_; }

  friend bool operator==(const Param&, const Param&) = default;

 private:
  Param() = default;
  std::string name_;
  Shape shape_;
  DType dtype_ = DType::kBf16;
  bool requires_grad_ = true;
  bool expert_ = false;
  std::int64_t bytes_ = 0;
};

}  // namespace fsdp
