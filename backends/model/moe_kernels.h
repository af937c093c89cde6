// SPDX-License-Identifier: Apache-2.0
// The mixture-of-experts kernels of the host kernel set: Mixtral's router (softmax, top-k with
// capacity slots), the dispatch of routed copies into slots, the weighted combine, and their
// backward passes. Equations: the DecoderKernels methods of the same names
// (backends/model/decoder_kernels.h); docs/design/parallelism.md, "Experts for real". The CUDA
// set (backends/cuda/cuda_kernels.cu) follows the same equations and orders of summation.
#pragma once

#include <cstdint>

namespace fsdp::backend {

void softmax_rows(std::int64_t rows, std::int64_t cols, const float* x, float* probs);
void moe_route(std::int64_t rows, std::int64_t experts, std::int64_t top_k, std::int64_t capacity,
               const float* probs, std::int32_t* choice_expert, float* choice_weight,
               std::int32_t* choice_slot, std::int32_t* slot_token);
void moe_dispatch(std::int64_t slots, std::int64_t hidden, const std::int32_t* slot_token,
                  const float* x, float* out);
void moe_dispatch_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                           const std::int32_t* choice_slot, const float* dslots, float* dx);
void moe_combine(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                 const std::int32_t* choice_slot, const float* choice_weight, const float* y,
                 float* out);
void moe_combine_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                          std::int64_t slots, const std::int32_t* choice_slot,
                          const float* choice_weight, const float* y, const float* dout,
                          float* dweight, float* dy);
void moe_router_backward(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                         const float* probs, const std::int32_t* choice_expert,
                         const float* choice_weight, const float* dweight, float* dlogits);

}  // namespace fsdp::backend
