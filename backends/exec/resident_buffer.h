// SPDX-License-Identifier: Apache-2.0
// ResidentBuffer: fp32 device memory that lives as long as its owner, outside the Arena (the
// executor's main weights, main grads, optimizer state, the loss slot): obtained zeroed from a
// Device's MemoryResource and returned to it by the destructor. Move-only; the resource must
// outlive the buffer. The holder never dereferences data() (it may be GPU memory): the Device's
// data ops do.
#pragma once

#include <cstdint>
#include <utility>

#include "backends/exec/arena.h"
#include "core/base/expected.h"

namespace fsdp::exec {

class ResidentBuffer {
 public:
  ResidentBuffer() = default;
  // `count` >= 0 zeroed floats (at least one element is obtained, so data() is never null).
  // Errors: count < 0 or count * 4 overflows (kInvalidArgument); the resource's errors.
  static Expected<ResidentBuffer> make(MemoryResource& memory, std::int64_t count);
  ~ResidentBuffer() { reset(); }
  ResidentBuffer(ResidentBuffer&& other) noexcept { *this = std::move(other); }
  ResidentBuffer& operator=(ResidentBuffer&& other) noexcept;
  ResidentBuffer(const ResidentBuffer&) = delete;
  ResidentBuffer& operator=(const ResidentBuffer&) = delete;

  float* data() const { return data_; }
  std::int64_t size() const { return count_; }
  // Returns the memory to the resource; the buffer becomes empty (data() == nullptr).
  void reset();

 private:
  MemoryResource* memory_ = nullptr;
  float* data_ = nullptr;
  std::int64_t count_ = 0;
  std::int64_t bytes_ = 0;
};

}  // namespace fsdp::exec
