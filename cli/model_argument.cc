// SPDX-License-Identifier: Apache-2.0
#include "cli/model_argument.h"

#include <optional>

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

// A size option that is only set when given (no default: the config's value applies otherwise).
po::typed_value<std::int64_t>* size_option(std::optional<std::int64_t>* out) {
  return po::value<std::int64_t>()->notifier([out](std::int64_t v) { *out = v; });
}

}  // namespace

void add_model_size_options(po::options_description& desc, HubOverrides* sizes) {
  // clang-format off
  desc.add_options()
      ("layers", size_option(&sizes->layers), "decoder layers, replacing the config's")
      ("hidden", size_option(&sizes->hidden),
       "hidden size; with it or --heads the head size becomes hidden / heads")
      ("ffn", size_option(&sizes->ffn), "MLP (feed-forward) size")
      ("heads", size_option(&sizes->heads), "attention heads")
      ("kv-heads", size_option(&sizes->kv_heads),
       "key/value heads, a divisor of the heads (the config's stay while they still divide)")
      ("vocab", size_option(&sizes->vocab), "vocabulary size");
  // clang-format on
}

}  // namespace fsdp::cli
