// SPDX-License-Identifier: Apache-2.0
// DType, Param, Unit and Model: the value types and their validating factories.
#include "core/model/model.h"

#include <cstdint>
#include <limits>

#include "core/model/dtype.h"
#include "core/model/param.h"
#include "core/model/unit.h"

#include <gtest/gtest.h>

namespace fsdp {
namespace {

Param param(std::string name, std::initializer_list<std::int64_t> dims,
            DType dtype = DType::kBf16, bool requires_grad = true) {
  return Param::make(std::move(name), Shape::make(dims).value(), dtype, requires_grad).value();
}

Unit unit(std::string name, std::int32_t parent, std::vector<Param> params,
          UnitFlops flops = {}, UnitActivations activations = {}) {
  return Unit::make(std::move(name), parent, std::move(params), flops, activations).value();
}

TEST(DTypeTest, WidthsAndNames) {
  EXPECT_EQ(dtype_bytes(DType::kBf16), 2);
  EXPECT_EQ(dtype_bytes(DType::kFp16), 2);
  EXPECT_EQ(dtype_bytes(DType::kFp32), 4);
  EXPECT_EQ(dtype_bytes(DType::kFp8), 1);
  for (const DType d : {DType::kBf16, DType::kFp16, DType::kFp32, DType::kFp8}) {
    EXPECT_EQ(parse_dtype(to_string(d)).value(), d);
  }
  EXPECT_EQ(parse_dtype("bfloat16").value(), DType::kBf16);
  EXPECT_EQ(parse_dtype("float32").value(), DType::kFp32);
  EXPECT_EQ(parse_dtype("float16").value(), DType::kFp16);
}

TEST(DTypeTest, UnknownNameIsAnErrorListingTheNames) {
  const auto d = parse_dtype("int4");
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().message(), "unknown dtype 'int4'; expected one of bf16, fp16, fp32, fp8");
}

TEST(ParamTest, KeepsFieldsAndComputesBytes) {
  const Param p = param("w", {4, 6}, DType::kFp32, false);
  EXPECT_EQ(p.name(), "w");
  EXPECT_EQ(p.numel(), 24);
  EXPECT_EQ(p.bytes(), 96);
  EXPECT_FALSE(p.requires_grad());
  EXPECT_EQ(p, param("w", {4, 6}, DType::kFp32, false));
  EXPECT_NE(p, param("w", {4, 6}, DType::kFp32, true));
}

TEST(ParamTest, RejectsEmptyAndControlCharacterNames) {
  const Shape s = Shape::make({2}).value();
  EXPECT_FALSE(Param::make("", s, DType::kBf16, true).has_value());
  const auto p = Param::make("a\nb", s, DType::kBf16, true);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().message(),
            "parameter name: expected a non-empty string without control characters, got "
            "'a\\x0ab'");
}

TEST(ParamTest, ByteOverflowIsOutOfRange) {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max() / 2;
  const auto p = Param::make("w", Shape::make({big}).value(), DType::kFp32, true);
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(p.error().message().find("parameter 'w'"), std::string::npos);
}

TEST(UnitTest, SumsParametersAndScalesFlops) {
  const Unit u = unit("layer", Unit::kNoParent, {param("a", {4, 4}), param("b", {4})},
                      UnitFlops{100, 3}, UnitActivations{10, 2});
  EXPECT_EQ(u.num_parameters(), 20);
  EXPECT_EQ(u.param_bytes(), 40);
  EXPECT_EQ(u.forward_flops_per_token(0).value(), 100);
  EXPECT_EQ(u.forward_flops_per_token(10).value(), 130);
  EXPECT_EQ(u.backward_flops_per_token(10).value(), 260);
}

TEST(UnitTest, RejectsDuplicateParamsNegativeFiguresAndBadParents) {
  auto dup = Unit::make("u", Unit::kNoParent, {param("a", {1}), param("a", {2})}, {}, {});
  ASSERT_FALSE(dup.has_value());
  EXPECT_EQ(dup.error().message(),
            "unit 'u': parameter names: expected unique names, got 'a' twice");
  auto neg = Unit::make("u", Unit::kNoParent, {}, UnitFlops{-1, 0}, {});
  ASSERT_FALSE(neg.has_value());
  EXPECT_EQ(neg.error().message(), "unit 'u': flops matmul: expected a non-negative integer, got -1");
  auto parent = Unit::make("u", -2, {}, {}, {});
  ASSERT_FALSE(parent.has_value());
  EXPECT_EQ(parent.error().message(),
            "unit 'u': parent: expected -1 (none) or a unit index, got -2");
}

TEST(UnitTest, FlopOverflowIsAnError) {
  const Unit u = unit("u", Unit::kNoParent, {},
                      UnitFlops{1, std::numeric_limits<std::int64_t>::max() / 2});
  const auto f = u.forward_flops_per_token(4);
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(f.error().code(), ErrorCode::kOutOfRange);
  EXPECT_FALSE(u.forward_flops_per_token(-1).has_value());
}

TEST(ModelTest, TreeTotalsAndChildren) {
  std::vector<Unit> units;
  units.push_back(unit("root", Unit::kNoParent, {param("r", {2, 2})}, UnitFlops{8, 0}));
  units.push_back(unit("left", 0, {param("l", {3}, DType::kFp32, false)}, UnitFlops{4, 1},
                       UnitActivations{5, 1}));
  units.push_back(unit("left.inner", 1, {param("li", {5})}));
  units.push_back(unit("right", 0, {}));
  const Model m = Model::make("toy", std::move(units)).value();
  EXPECT_EQ(m.num_parameters(), 12);
  EXPECT_EQ(m.num_trainable_parameters(), 9);
  EXPECT_EQ(m.param_bytes(), 8 + 12 + 10);
  EXPECT_EQ(m.flops(), (UnitFlops{12, 1}));
  EXPECT_EQ(m.activations(), (UnitActivations{5, 1}));
  EXPECT_EQ(m.forward_flops_per_token(100).value(), 112);
  EXPECT_EQ(m.training_flops_per_token(100).value(), 336);
  const auto kids = [&](std::int32_t u) {
    const auto c = m.children(u);
    return std::vector<std::int32_t>(c.begin(), c.end());
  };
  EXPECT_EQ(kids(Unit::kNoParent), std::vector<std::int32_t>({0}));
  EXPECT_EQ(kids(0), std::vector<std::int32_t>({1, 3}));
  EXPECT_EQ(m.find_unit("left.inner"), 2);
  EXPECT_EQ(m.find_unit("nope"), -1);
}

TEST(ModelTest, RejectsBadTrees) {
  {
    std::vector<Unit> units;
    units.push_back(unit("a", 1, {}));
    units.push_back(unit("b", Unit::kNoParent, {}));
    const auto m = Model::make("m", std::move(units));
    ASSERT_FALSE(m.has_value());
    EXPECT_EQ(m.error().message(),
              "model 'm': unit 'a' parent: expected -1 or an earlier unit index in [0, 0), got 1");
  }
  {
    std::vector<Unit> units;
    units.push_back(unit("a", Unit::kNoParent, {}));
    units.push_back(unit("a", Unit::kNoParent, {}));
    const auto m = Model::make("m", std::move(units));
    ASSERT_FALSE(m.has_value());
    EXPECT_EQ(m.error().message(),
              "model 'm': unit names: expected unique names, got 'a' at indices 0 and 1");
  }
  {
    std::vector<Unit> units;
    units.push_back(unit("a", Unit::kNoParent, {param("w", {1})}));
    units.push_back(unit("b", Unit::kNoParent, {param("w", {1})}));
    const auto m = Model::make("m", std::move(units));
    ASSERT_FALSE(m.has_value());
    EXPECT_EQ(m.error().message(),
              "model 'm': parameter names: expected unique names, got 'w' in units 'a' and 'b'");
  }
  EXPECT_FALSE(Model::make("m", {}).has_value());
  EXPECT_FALSE(Model::make("", {unit("a", Unit::kNoParent, {})}).has_value());
}

TEST(ModelTest, ParameterTotalOverflowIsOutOfRange) {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max() / 4;
  std::vector<Unit> units;
  for (int i = 0; i < 5; ++i) {
    units.push_back(unit("u" + std::to_string(i), Unit::kNoParent,
                         {param("w" + std::to_string(i), {big}, DType::kFp8)}));
  }
  const auto m = Model::make("m", std::move(units));
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(m.error().message().find("expected a value that fits int64"), std::string::npos);
}

}  // namespace
}  // namespace fsdp
