// SPDX-License-Identifier: Apache-2.0
// The usage example of docs/design/backends.md ("The C++ training API"), compiled and run: keep
// the two in sync.
#include "core/api/fsdp_context.h"
#include "core/api/fully_shard.h"
#include "core/api/microbatch.h"
#include "tests/core/api/api_test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace fsdp {
namespace {

// --- begin docs example ---
// One optimizer step of ZeRO-3 on 8 ranks with every module of `model` wrapped.
Expected<Schedule> zero3_step(const Model& model, std::int64_t num_microbatches) {
  FSDP_TRY(const DeviceMesh mesh, parse_device_mesh("dp=8"));
  FSDP_TRY(const Placements placements,
           Placements::make(mesh, /*dp_axes=*/{std::string("dp")},
                            /*parameter=*/{Placement::shard()}, /*gradient=*/{Placement::shard()},
                            /*optimizer=*/{Placement::shard()}));
  FsdpContext ctx(model, Workload{.seq_len = 2048, .micro_batch_size = 1});
  {
    FSDP_TRY(FullyShardScope scope, fully_shard_context(ctx));
    // Children before their ancestors, as the reference requires.
    for (auto it = model.units().rbegin(); it != model.units().rend(); ++it) {
      FSDP_RETURN_IF_ERROR(fully_shard(it->name(), mesh, placements));
    }
    FSDP_RETURN_IF_ERROR(scope.close());  // or let the scope end: it finalises then too
  }
  for (std::int64_t i = 0; i < num_microbatches; ++i) {
    FSDP_TRY(const MicrobatchScope mb, microbatch(ctx, /*is_last=*/i == num_microbatches - 1));
    // A backend runs microbatch i's forward and backward here.
  }
  return ctx.schedule();  // also: ctx.unit_model(), ctx.config()
}
// --- end docs example ---

TEST(TrainingApiExampleTest, DocsExampleBuildsTheZero3Schedule) {
  const Model model = testing::decoder_tree();
  const auto schedule = zero3_step(model, 4);
  ASSERT_TRUE(schedule.has_value()) << schedule.error().message();
  FsdpOptions options;
  options.num_microbatches = 4;
  const FsdpConfig config =
      make_fsdp_config(Strategy::kZero3, testing::mesh_of("dp=8"), options).value();
  EXPECT_TRUE(*schedule ==
              build_schedule(model, config, Workload{.seq_len = 2048, .micro_batch_size = 1})
                  .value());
}

}  // namespace
}  // namespace fsdp
