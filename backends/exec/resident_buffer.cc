// SPDX-License-Identifier: Apache-2.0
// ResidentBuffer: one allocation and one zero-fill from the device's memory resource.
#include "backends/exec/resident_buffer.h"

#include <limits>

#include "core/base/strings.h"

namespace fsdp::exec {

Expected<ResidentBuffer> ResidentBuffer::make(MemoryResource& memory, std::int64_t count) {
  constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));
  if (count < 0 || count > std::numeric_limits<std::int64_t>::max() / kFloat - 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("resident buffer of ", count, " floats; expected 0 <= count < 2^61"));
  }
  const std::int64_t bytes = (count > 0 ? count : 1) * kFloat;
  FSDP_TRY(void* p, memory.allocate(bytes));
  memory.zero(p, bytes);
  ResidentBuffer b;
  b.memory_ = &memory;
  b.data_ = static_cast<float*>(p);
  b.count_ = count;
  b.bytes_ = bytes;
  return b;
}

ResidentBuffer& ResidentBuffer::operator=(ResidentBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    memory_ = std::exchange(other.memory_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void ResidentBuffer::reset() {
  if (data_ != nullptr) {
    memory_->deallocate(data_, bytes_);
    data_ = nullptr;
    count_ = 0;
    bytes_ = 0;
  }
}

}  // namespace fsdp::exec
