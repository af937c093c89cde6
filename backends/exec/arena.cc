// SPDX-License-Identifier: Apache-2.0
// Arena: exact-size block cache behind a mutex. Schedules reuse a handful of sizes every
// microbatch, so exact-size, stream-ordered reuse keeps reserved memory at the live high-water
// mark without a general-purpose allocator.
#include "backends/exec/arena.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp::exec {
namespace {

constexpr std::size_t kAlignment = 64;

std::size_t cls_index(BufferClass cls) { return static_cast<std::size_t>(cls); }

}  // namespace

Expected<void*> HostMemory::allocate(std::int64_t bytes) {
  void* p = ::operator new(static_cast<std::size_t>(bytes > 0 ? bytes : 1),
                           std::align_val_t{kAlignment}, std::nothrow);
  if (p == nullptr) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("host memory: cannot allocate ", bytes, " bytes"));
  }
  return p;
}

void HostMemory::deallocate(void* ptr, std::int64_t /*bytes*/) {
  ::operator delete(ptr, std::align_val_t{kAlignment});
}

void HostMemory::zero(void* ptr, std::int64_t bytes) {
  std::memset(ptr, 0, static_cast<std::size_t>(bytes));
}

Arena::~Arena() {
  for (Block& b : in_use_) {
    memory_->deallocate(b.ptr, b.bytes);
  }
  for (Block& b : cached_) {
    memory_->deallocate(b.ptr, b.bytes);
  }
}

Expected<void*> Arena::allocate(std::int64_t bytes, BufferClass cls, StreamKind stream,
                                std::int64_t step, std::int32_t op, std::int32_t buffer) {
  if (bytes < 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("arena: buffer ", buffer, " asks for ", bytes, " bytes; expected >= 0"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  Block block;
  for (std::size_t i = 0; i < cached_.size(); ++i) {
    if (cached_[i].bytes == bytes && (!cached_[i].fence || cached_[i].fence(stream))) {
      block = std::move(cached_[i]);
      cached_.erase(cached_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (block.ptr == nullptr) {
    FSDP_TRY(block.ptr, memory_->allocate(bytes));
    block.bytes = bytes;
    reserved_ += bytes;
  }
  memory_->zero_on(block.ptr, bytes, stream);
  block.requested = bytes;
  block.cls = cls;
  block.fence = nullptr;
  live_by_class_[cls_index(cls)] += bytes;
  high_by_class_[cls_index(cls)] =
      std::max(high_by_class_[cls_index(cls)], live_by_class_[cls_index(cls)]);
  live_total_ += bytes;
  high_total_ = std::max(high_total_, live_total_);
  log_.push_back(ArenaRecord{clock_ ? clock_(stream) : 0, stream, step, op, buffer, cls,
                             /*is_alloc=*/true, bytes, live_total_});
  void* p = block.ptr;
  in_use_.push_back(std::move(block));
  return p;
}

void Arena::release(void* ptr, Fence fence, StreamKind stream, std::int64_t step,
                    std::int32_t op, std::int32_t buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = 0; i < in_use_.size(); ++i) {
    if (in_use_[i].ptr != ptr) {
      continue;
    }
    Block block = std::move(in_use_[i]);
    in_use_.erase(in_use_.begin() + static_cast<std::ptrdiff_t>(i));
    live_by_class_[cls_index(block.cls)] -= block.requested;
    live_total_ -= block.requested;
    log_.push_back(ArenaRecord{clock_ ? clock_(stream) : 0, stream, step, op, buffer, block.cls,
                               /*is_alloc=*/false, block.requested, live_total_});
    block.fence = std::move(fence);
    cached_.push_back(std::move(block));
    return;
  }
  FSDP_CHECK(false) << "arena: release of a pointer that is not live (buffer " << buffer << ")";
}

std::int64_t Arena::live_bytes(BufferClass cls) const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_by_class_[cls_index(cls)];
}

std::int64_t Arena::high_water(BufferClass cls) const {
  std::lock_guard<std::mutex> lock(mu_);
  return high_by_class_[cls_index(cls)];
}

std::int64_t Arena::live_bytes_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_total_;
}

std::int64_t Arena::high_water_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return high_total_;
}

std::int64_t Arena::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

std::vector<ArenaRecord> Arena::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

void Arena::set_clock(std::function<std::int64_t(StreamKind)> clock) {
  std::lock_guard<std::mutex> lock(mu_);
  clock_ = std::move(clock);
}

void Arena::resolve_times(const std::function<std::int64_t(std::int64_t)>& resolve) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::size_t i = resolved_; i < log_.size(); ++i) {
    log_[i].time_ns = resolve(log_[i].time_ns);
  }
  resolved_ = log_.size();
}

}  // namespace fsdp::exec
