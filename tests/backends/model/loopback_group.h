// SPDX-License-Identifier: Apache-2.0
// An in-test tensor- or expert-parallel group for decoders run as threads (SplitComm over shared
// vectors and a barrier): what the executor's communicators do, without the executor.
#pragma once

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/model/split_comm.h"
#include "core/base/strings.h"

namespace fsdp::backend::testing {

// The members of one in-test tensor-parallel group, each a thread: sums in member order.
class LoopbackGroup {
 public:
  explicit LoopbackGroup(std::int64_t size)
      : size_(size), slots_(static_cast<std::size_t>(size)), barrier_(size) {}

  class Member final : public SplitComm {
   public:
    Member(LoopbackGroup* group, std::int64_t rank) : group_(group), rank_(rank) {}
    std::int64_t rank() const override { return rank_; }
    std::int64_t size() const override { return group_->size_; }
    Status all_reduce(std::string_view site, float* buf, std::int64_t n) override {
      sites.push_back(str_cat("all-reduce ", site));
      publish(buf, n);
      for (std::int64_t i = 0; i < n; ++i) {
        float s = 0.0F;
        for (const std::vector<float>& slot : group_->slots_) {
          s += slot[static_cast<std::size_t>(i)];
        }
        buf[i] = s;
      }
      group_->barrier_.arrive_and_wait();
      return ok_status();
    }
    Status all_gather(std::string_view site, const float* send, std::int64_t n,
                      float* recv) override {
      sites.push_back(str_cat("all-gather ", site));
      publish(send, n);
      for (std::size_t r = 0; r < group_->slots_.size(); ++r) {
        std::copy_n(group_->slots_[r].begin(), n, recv + static_cast<std::int64_t>(r) * n);
      }
      group_->barrier_.arrive_and_wait();
      return ok_status();
    }
    Status all_to_all(std::string_view site, const float* send, std::int64_t n,
                      float* recv) override {
      sites.push_back(str_cat("all-to-all ", site));
      publish(send, n * group_->size_);
      for (std::size_t r = 0; r < group_->slots_.size(); ++r) {
        std::copy_n(group_->slots_[r].begin() + rank_ * n, n,
                    recv + static_cast<std::int64_t>(r) * n);
      }
      group_->barrier_.arrive_and_wait();
      return ok_status();
    }
    std::vector<std::string> sites;

   private:
    void publish(const float* values, std::int64_t n) {
      group_->slots_[static_cast<std::size_t>(rank_)].assign(values, values + n);
      group_->barrier_.arrive_and_wait();
    }
    LoopbackGroup* group_;
    std::int64_t rank_;
  };

 private:
  std::int64_t size_;
  std::vector<std::vector<float>> slots_;
  std::barrier<> barrier_;
};

}  // namespace fsdp::backend::testing
