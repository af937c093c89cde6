// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/placements.h"

#include "core/layout/local_range.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fsdp {
namespace {

using V = std::vector<Placement>;
const Placement kS = Placement::shard();
const Placement kR = Placement::replicate();
const Placement kP = Placement::partial(ReduceOp::kAvg);
const Placement kTA = Placement::tensor_atomic();
const Placement kRA = Placement::row_atomic();

DeviceMesh mesh_of(const char* text) { return parse_device_mesh(text).value(); }

// §2.5 / §1.5: a dp4 layout with rank offsets (0, 12, 24, 36) and size 48.
GlobalLayout dp4_layout() {
  return GlobalLayout::make({Shape::make({48}).value()}, {0}, 48, {0, 12, 24, 36}).value();
}

std::string error_of(const Expected<Placements>& p) {
  return p ? std::string("<ok>") : p.error().message();
}

TEST(PlacementsTest, LengthsMustMatchDpAxes) {
  const DeviceMesh mesh = mesh_of("o=2,i=2");
  auto p = Placements::make(mesh, {0, 1}, {kS}, {kP, kS}, {kR, kS});
  EXPECT_EQ(p.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of(p), "expected 2 parameter placements (one per dp axis), got 1: [Shard(0)]");
  EXPECT_EQ(error_of(Placements::make(mesh, {0, 1}, {kR, kS}, {kP}, {kR, kS})),
            "expected 2 gradient placements (one per dp axis), got 1: [Partial(avg)]");
  EXPECT_EQ(error_of(Placements::make(mesh, {0, 1}, {kR, kS}, {kP, kS}, {kR, kS, kS})),
            "expected 2 optimizer placements (one per dp axis), got 3: "
            "[Replicate(), Shard(0), Shard(0)]");
}

TEST(PlacementsTest, DpAxesResolveIndicesNegativesAndNames) {
  const DeviceMesh mesh = mesh_of("dp_outer=2,dp_inner=4");
  const V param = {kR, kS}, grad = {kP, kS}, opt = {kR, kS};
  auto by_index = Placements::make(mesh, {0, 1}, param, grad, opt);
  ASSERT_TRUE(by_index) << error_of(by_index);
  EXPECT_EQ(by_index->dp_axes(), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(Placements::make(mesh, {-2, -1}, param, grad, opt).value(), *by_index);
  EXPECT_EQ(Placements::make(mesh, {"dp_outer", "dp_inner"}, param, grad, opt).value(),
            *by_index);
  EXPECT_EQ(Placements::make(mesh, {0, "dp_inner"}, param, grad, opt).value(), *by_index);
  EXPECT_EQ(by_index->dp_size(), 8);
  EXPECT_EQ(by_index->num_dp_axes(), 2);
}

TEST(PlacementsTest, DpAxisOutOfRangeOrUnknown) {
  const DeviceMesh mesh = mesh_of("dp_outer=2,dp_inner=4");
  const V param = {kR, kS}, grad = {kP, kS}, opt = {kR, kS};
  auto high = Placements::make(mesh, {0, 2}, param, grad, opt);
  EXPECT_EQ(high.error().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(error_of(high),
            "dp axis 2 is out of range for the 2-axis mesh dp_outer=2,dp_inner=4: expected a "
            "value in [-2, 2)");
  EXPECT_EQ(Placements::make(mesh, {-3, 1}, param, grad, opt).error().code(),
            ErrorCode::kOutOfRange);
  auto unknown = Placements::make(mesh, {"dp_outer", "tp"}, param, grad, opt);
  EXPECT_EQ(unknown.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of(unknown),
            "dp axis 'tp' is not an axis of mesh dp_outer=2,dp_inner=4: expected one of "
            "dp_outer, dp_inner");
  EXPECT_EQ(error_of(Placements::make(mesh, {}, {}, {}, {})),
            "dp axes must name at least one axis of mesh dp_outer=2,dp_inner=4, got none");
}

TEST(PlacementsTest, DpAxesMustBeDistinct) {
  const DeviceMesh mesh = mesh_of("dp_outer=2,dp_inner=4");
  auto dup = Placements::make(mesh, {1, "dp_inner"}, {kR, kS}, {kP, kS}, {kR, kS});
  EXPECT_EQ(dup.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of(dup),
            "dp axes must be distinct: mesh axis 1 (dp_inner) appears at positions 0 and 1 of "
            "[1, dp_inner]");
  EXPECT_NE(error_of(Placements::make(mesh, {-1, 1}, {kR, kS}, {kP, kS}, {kR, kS}))
                .find("must be distinct"),
            std::string::npos);
}

TEST(PlacementsTest, DpAxesMustFollowMeshAxisOrder) {
  const DeviceMesh mesh = mesh_of("dp_outer=2,dp_inner=4");
  auto reversed = Placements::make(mesh, {"dp_inner", "dp_outer"}, {kR, kS}, {kP, kS}, {kR, kS});
  EXPECT_EQ(reversed.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of(reversed),
            "dp axes must follow mesh-axis order: expected ascending axis indices, got [1, 0] "
            "from [dp_inner, dp_outer]");
}

TEST(PlacementsTest, DpSubMeshIsNotImplemented) {
  const DeviceMesh mesh = mesh_of("pp=8,edp=16");
  auto sub = Placements::make(mesh, {"edp"}, {kS}, {kS}, {kS});
  ASSERT_FALSE(sub.has_value());
  EXPECT_EQ(sub.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(error_of(sub),
            "dp axes [edp] on mesh pp=8,edp=16 leave out mesh axis 0 (pp), which is not "
            "implemented: expected every mesh axis but 'tp' and 'ep' among the dp axes, got [1]");
}

// The routed experts' placements leave the expert-parallel axis out (docs/design/parallelism.md).
TEST(PlacementsTest, ExpertPlacementsDropTheExpertParallelAxis) {
  const DeviceMesh mesh = mesh_of("dp=8,ep=8");
  const Placements dense =
      Placements::make(mesh, {"dp", "ep"}, {kS, kS}, {kS, kS}, {kS, kS}).value();
  EXPECT_EQ(dense.dp_size(), 64);
  const Placements experts = dense.without_dp_axis(1).value();
  EXPECT_EQ(experts.dp_axes(), (std::vector<std::int64_t>{0}));
  EXPECT_EQ(experts.dp_size(), 8);
  EXPECT_EQ(experts.parameter(), (std::vector<Placement>{kS}));
  // Ranks 0..7 (one dp index, every ep index) are expert-DP rank 0.
  EXPECT_EQ(experts.dp_coordinate(7)->local_ranks, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(experts.dp_coordinate(9)->local_ranks, (std::vector<std::int64_t>{1}));
  EXPECT_FALSE(experts.without_dp_axis(0).has_value());  // the only dp axis
  EXPECT_FALSE(dense.without_dp_axis(5).has_value());
}

TEST(PlacementsTest, TheTensorParallelAxisStaysOutOfTheDpMesh) {
  const DeviceMesh mesh = mesh_of("dp=32,tp=8");
  auto p = Placements::make(mesh, {"dp"}, {kS}, {kS}, {kS});
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(p->dp_size(), 32);
  EXPECT_EQ(p->dp_axes(), (std::vector<std::int64_t>{0}));
  // Ranks 0..7 share DP coordinate 0 (one per tp rank); rank 8 is DP rank 1.
  EXPECT_EQ(p->dp_coordinate(7)->local_ranks, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(p->dp_coordinate(8)->local_ranks, (std::vector<std::int64_t>{1}));
  // The tp axis is never a DP axis, and every other axis must be one.
  EXPECT_EQ(error_of(Placements::make(mesh, {"dp", "tp"}, {kS, kS}, {kS, kS}, {kS, kS})),
            "dp axes [dp, tp] on mesh dp=32,tp=8 include mesh axis 1 (tp), the tensor-parallel "
            "axis: expected its ranks to hold slices of one replica, never a dp axis");
  EXPECT_EQ(Placements::make(mesh_of("dp=4,tp=2,x=2"), {"dp"}, {kS}, {kS}, {kS}).error().code(),
            ErrorCode::kFailedPrecondition);
}

TEST(PlacementsTest, ShardAxesMustBeASuffix) {
  const DeviceMesh mesh = mesh_of("o=2,i=2");
  auto p = Placements::make(mesh, {0, 1}, {kS, kR}, {kS, kP}, {kS, kR});
  EXPECT_EQ(p.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of(p),
            "parameter placements [Shard(0), Replicate()] must have their Shard axes as a "
            "suffix: dp axis 0 (o) is Shard(0) but dp axis 1 (i) is Replicate()");
  EXPECT_EQ(error_of(Placements::make(mesh, {0, 1}, {kR, kS}, {kS, kP}, {kR, kS})),
            "gradient placements [Shard(0), Partial(avg)] must have their Shard axes as a "
            "suffix: dp axis 0 (o) is Shard(0) but dp axis 1 (i) is Partial(avg)");
}

TEST(PlacementsTest, WeightsAreNeverPartial) {
  const DeviceMesh mesh = mesh_of("dp=4");
  EXPECT_EQ(error_of(Placements::make(mesh, {0}, {kP}, {kP}, {kR})),
            "parameter placement on dp axis 0 (dp) must be Shard or Replicate, got Partial(avg)");
  EXPECT_EQ(error_of(Placements::make(mesh, {0}, {kR}, {kP}, {kP})),
            "optimizer placement on dp axis 0 (dp) must be Shard or Replicate, got Partial(avg)");
}

TEST(PlacementsTest, TensorAtomicNeedsOneDpAxis) {
  const DeviceMesh mesh = mesh_of("o=2,i=2");
  auto p = Placements::make(mesh, {0, 1}, {kR, kTA}, {kP, kTA}, {kR, kTA});
  EXPECT_EQ(p.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(error_of(p),
            "parameter placement TensorAtomic() on a 2-axis dp mesh is not implemented: "
            "expected a 1-D dp mesh");
}

TEST(PlacementsTest, TensorAtomicCannotBeMixed) {
  const DeviceMesh mesh = mesh_of("dp=4");
  auto p = Placements::make(mesh, {0}, {kR}, {kS}, {kTA});
  EXPECT_EQ(p.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of(p),
            "Shard(0) in the gradient placements cannot be mixed with TensorAtomic() in the "
            "optimizer placements: expected one Shard kind across parameter, gradient and "
            "optimizer");
  EXPECT_NE(error_of(Placements::make(mesh, {0}, {kTA}, {kRA}, {kTA})).find("cannot be mixed"),
            std::string::npos);
  EXPECT_TRUE(Placements::make(mesh, {0}, {kTA}, {kTA}, {kTA}));
}

TEST(PlacementsTest, RowBasedShardKindsMustAgree) {
  const DeviceMesh mesh = mesh_of("dp=4");
  const Placement b32 = Placement::block_atomic(32).value();
  EXPECT_EQ(error_of(Placements::make(mesh, {0}, {kRA}, {b32}, {kRA})),
            "RowAtomic() in the parameter placements cannot be mixed with BlockAtomic(32) in "
            "the gradient placements: expected one Shard kind across parameter, gradient and "
            "optimizer");
  EXPECT_FALSE(
      Placements::make(mesh, {0}, {b32}, {Placement::block_atomic(16).value()}, {b32}));
  // Shard(0) is specialised per group, so it goes with either internal kind.
  EXPECT_TRUE(Placements::make(mesh, {0}, {kS}, {kRA}, {kS}));
  EXPECT_TRUE(Placements::make(mesh, {0}, {b32}, {kS}, {kS}));
}

TEST(PlacementsTest, OptimizerRangeMustLieInsideParameterRange) {
  // §3.3: parameter [S] with optimizer [R] fails with the DBuffer.view error.
  const DeviceMesh mesh = mesh_of("dp=4");
  auto p = Placements::make(mesh, {0}, {kS}, {kS}, {kR});
  EXPECT_EQ(p.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of(p),
            "optimizer placements [Replicate()] need a local range contained in that of "
            "parameter placements [Shard(0)] (DBuffer.view() requires a range contained in its "
            "local buffer): expected dp axis 0 (dp) sharded for the optimizer, got Replicate()");
  // The layout-level rule agrees.
  const GlobalLayout layout = dp4_layout();
  const MeshCoordinate coord{{4}, {1}};
  const std::vector<AxisPlacement> s = {AxisPlacement::kShard};
  const std::vector<AxisPlacement> r = {AxisPlacement::kReplicate};
  EXPECT_FALSE(check_view_contained(layout, coord, s, r));
  // 2-D: HSDP-like parameter [R,S] with optimizer [R,R] fails too; [S,S] inside [R,S] is fine.
  const DeviceMesh mesh2 = mesh_of("o=2,i=2");
  EXPECT_NE(error_of(Placements::make(mesh2, {0, 1}, {kR, kS}, {kP, kP}, {kR, kR}))
                .find("expected dp axis 1 (i) sharded for the optimizer"),
            std::string::npos);
  EXPECT_TRUE(Placements::make(mesh2, {0, 1}, {kR, kS}, {kP, kS}, {kS, kS}));
  // A size-1 axis never splits anything.
  EXPECT_TRUE(Placements::make(mesh_of("dp=1"), {0}, {kS}, {kS}, {kR}));
}

TEST(PlacementsTest, RedistributesTheRuntimeNeedsMustBeSupported) {
  const DeviceMesh mesh = mesh_of("o=2,i=2");
  // ZeRO-3 over both axes: the partial-grad buffer reduce-scatters over both, inner first (the
  // project's extension for expert-parallel meshes; the reference refuses it).
  EXPECT_TRUE(Placements::make(mesh, {0, 1}, {kS, kS}, {kS, kS}, {kS, kS}));
  // No-shard over both axes: finalisation would all-reduce two axes at once.
  EXPECT_NE(error_of(Placements::make(mesh, {0, 1}, {kR, kR}, {kP, kP}, {kR, kR}))
                .find("gradient finalisation (gradient to optimizer placements)"),
            std::string::npos);
  // Partial(sum) gradients: the partial-grad buffer is Partial(avg) (§4.6).
  EXPECT_NE(error_of(Placements::make(mesh_of("dp=4"), {0},
                                      {kR}, {Placement::partial(ReduceOp::kSum)}, {kR}))
                .find("gradient reduction"),
            std::string::npos);
  // Shard(0) mixed with RowAtomic is one Shard kind once specialised: no false alarm.
  EXPECT_TRUE(Placements::make(mesh_of("dp=4"), {0}, {kR}, {kS}, {kRA}));
}

TEST(PlacementsTest, LocalRangesFollowSection15) {
  const DeviceMesh mesh = mesh_of("o=2,i=2");
  const GlobalLayout layout = dp4_layout();
  // Parameter [R,R] (ZeRO-2-like), gradient [P,S], optimizer [R,S] (HSDP-like).
  auto a = Placements::make(mesh, {0, 1}, {kR, kR}, {kP, kS}, {kR, kS});
  ASSERT_TRUE(a) << error_of(a);
  // HFSDP: optimizer [S,S].
  auto b = Placements::make(mesh, {0, 1}, {kR, kS}, {kP, kS}, {kS, kS});
  ASSERT_TRUE(b) << error_of(b);
  const auto range = [&](const Placements& p, BufferRole role, std::int64_t o, std::int64_t i) {
    const std::vector<std::int64_t> coord = {o, i};
    return p.local_range(role, layout, mesh.rank_of(coord).value()).value();
  };
  // [S,S]: segment = r_inner * O + r_outer.
  EXPECT_EQ(range(*b, BufferRole::kOptimizer, 0, 0), (Range{0, 12}));
  EXPECT_EQ(range(*b, BufferRole::kOptimizer, 1, 0), (Range{12, 12}));
  EXPECT_EQ(range(*b, BufferRole::kOptimizer, 0, 1), (Range{24, 12}));
  EXPECT_EQ(range(*b, BufferRole::kOptimizer, 1, 1), (Range{36, 12}));
  // [R,S]
  for (std::int64_t o = 0; o < 2; ++o) {
    EXPECT_EQ(range(*b, BufferRole::kParameter, o, 0), (Range{0, 24}));
    EXPECT_EQ(range(*b, BufferRole::kParameter, o, 1), (Range{24, 24}));
    EXPECT_EQ(range(*a, BufferRole::kOptimizer, o, 1), (Range{24, 24}));
  }
  // [R,R]
  for (std::int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(a->local_range(BufferRole::kParameter, layout, r).value(), (Range{0, 48}));
  }
  EXPECT_EQ(b->local_range(BufferRole::kParameter, layout, 4).error().code(),
            ErrorCode::kOutOfRange);
  EXPECT_EQ(b->num_shards(BufferRole::kOptimizer), 4);
  EXPECT_EQ(b->num_shards(BufferRole::kParameter), 2);
  EXPECT_EQ(a->num_shards(BufferRole::kParameter), 1);
  EXPECT_TRUE(a->is_replicated(BufferRole::kParameter));
  EXPECT_FALSE(b->is_replicated(BufferRole::kParameter));
  // The structural containment rule agrees with check_view_contained on every rank.
  for (std::int64_t r = 0; r < 4; ++r) {
    const MeshCoordinate c = b->dp_coordinate(r).value();
    EXPECT_TRUE(check_view_contained(layout, c, b->axis_placements(BufferRole::kParameter),
                                     b->axis_placements(BufferRole::kOptimizer)));
  }
}

TEST(PlacementsTest, SpecializeMakesInternalKindsPerGroupDtype) {
  const DeviceMesh mesh = mesh_of("dp=4");
  auto p = Placements::make(mesh, {0}, {kR}, {kP}, {kS}).value();
  auto bf16 = p.specialize(DType::kBf16);
  ASSERT_TRUE(bf16) << bf16.error().message();
  EXPECT_EQ(bf16->optimizer(), V{kRA});
  EXPECT_EQ(bf16->gradient(), V{kP});
  auto fp8 = p.specialize(DType::kFp8);
  ASSERT_TRUE(fp8);
  EXPECT_EQ(fp8->optimizer(), V{Placement::block_atomic(32).value()});
  // Shard(0) with an explicit RowAtomic is fine for bf16 but clashes for an MXFP8 group.
  auto mixed = Placements::make(mesh, {0}, {kR}, {kS}, {kRA}).value();
  EXPECT_TRUE(mixed.specialize(DType::kBf16));
  EXPECT_EQ(mixed.specialize(DType::kFp8).error().message(),
            "placements for dtype fp8: BlockAtomic(32) in the gradient placements cannot be "
            "mixed with RowAtomic() in the optimizer placements: expected one Shard kind across "
            "parameter, gradient and optimizer");
}

TEST(PlacementsTest, CheckLayoutValidatesEachShardKind) {
  const DeviceMesh mesh = mesh_of("dp=4");
  const GlobalLayout layout = dp4_layout();
  auto zero3 = Placements::make(mesh, {0}, {kS}, {kS}, {kS}).value();
  EXPECT_TRUE(zero3.check_layout(layout, ShardLayout::kPadded));
  // Tensor (48,) at 0 crosses every segment boundary: not a TensorAtomic layout.
  auto ta = Placements::make(mesh, {0}, {kTA}, {kTA}, {kTA}).value();
  auto s = ta.check_layout(layout, ShardLayout::kPadded);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message().rfind("layout for parameter placement TensorAtomic(): ", 0), 0u)
      << s.error().message();
}

TEST(PlacementsTest, ToString) {
  auto p = Placements::make(mesh_of("dp_outer=2,dp_inner=4"), {0, 1}, {kR, kS}, {kP, kS},
                            {kS, kS})
               .value();
  EXPECT_EQ(to_string(p),
            "dp_axes=[dp_outer, dp_inner] parameter=[Replicate(), Shard(0)] "
            "gradient=[Partial(avg), Shard(0)] optimizer=[Shard(0), Shard(0)]");
  EXPECT_EQ(to_string(DpAxisRef{std::int64_t{-1}}), "-1");
  EXPECT_EQ(to_string(BufferRole::kOptimizer), "optimizer");
  EXPECT_EQ(all_partial(2, ReduceOp::kAvg), (V{kP, kP}));
  EXPECT_EQ(all_replicate(1), V{kR});
}

}  // namespace
}  // namespace fsdp
