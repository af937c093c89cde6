// SPDX-License-Identifier: Apache-2.0
// DeviceArray: memory handed back to the kernel set that allocated it (decoder_kernels.h).
#include "backends/model/decoder_kernels.h"

namespace fsdp::backend {

DeviceArray& DeviceArray::operator=(DeviceArray&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceArray::reset() noexcept {
  if (ptr_ != nullptr) {
    owner_->release(ptr_, bytes_);
    owner_ = nullptr;
    ptr_ = nullptr;
    bytes_ = 0;
  }
}

}  // namespace fsdp::backend
