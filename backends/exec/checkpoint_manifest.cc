// SPDX-License-Identifier: Apache-2.0
#include "backends/exec/checkpoint_manifest.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <utility>

#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/model/json_fields.h"
#include "core/policy/optimizer_policy.h"

namespace fsdp::exec {
namespace {

using nlohmann::json;

Expected<double> get_number(const JsonObjectReader& r, std::string_view key) {
  const json* v = r.find(key);
  if (v == nullptr) {
    return r.error(key, "a number", "nothing");
  }
  if (!v->is_number()) {
    return r.error(key, "a number", describe_json(*v));
  }
  return v->get<double>();
}

Expected<std::uint64_t> get_unsigned(const JsonObjectReader& r, std::string_view key,
                                     std::uint64_t max) {
  const json* v = r.find(key);
  if (v == nullptr) {
    return r.error(key, "a non-negative integer", "nothing");
  }
  if (!(v->is_number_unsigned() || (v->is_number_integer() && v->get<std::int64_t>() >= 0)) ||
      v->get<std::uint64_t>() > max) {
    return r.error(key, str_cat("an integer in [0, ", max, "]"), describe_json(*v));
  }
  return v->get<std::uint64_t>();
}

Expected<JsonObjectReader> object_at(const JsonObjectReader& parent, std::string_view key) {
  FSDP_TRY(const json* obj, parent.get_object(key));
  return JsonObjectReader::make(*obj, parent.source(), parent.field_path(key));
}

Expected<std::vector<ManifestUnit>> parse_units(const JsonObjectReader& model) {
  FSDP_TRY(const json* units, model.get_array("units"));
  std::vector<ManifestUnit> out;
  for (std::size_t u = 0; u < units->size(); ++u) {
    FSDP_TRY(JsonObjectReader ur,
             JsonObjectReader::make((*units)[u], model.source(),
                                    str_cat(model.field_path("units"), "[", u, "]")));
    ManifestUnit unit;
    FSDP_TRY(unit.name, ur.get_string("name"));
    FSDP_TRY(const json* params, ur.get_array("params"));
    for (std::size_t p = 0; p < params->size(); ++p) {
      FSDP_TRY(JsonObjectReader pr,
               JsonObjectReader::make((*params)[p], model.source(),
                                      str_cat(ur.field_path("params"), "[", p, "]")));
      ManifestParam param;
      FSDP_TRY(param.name, pr.get_string("name"));
      FSDP_TRY(const json* shape, pr.get_array("shape"));
      for (std::size_t d = 0; d < shape->size(); ++d) {
        FSDP_TRY(std::int64_t dim, json_to_int((*shape)[d], 0, model.source(),
                                               str_cat(pr.field_path("shape"), "[", d, "]")));
        param.shape.push_back(dim);
      }
      std::int64_t numel = 1;
      for (std::int64_t dim : param.shape) {
        if (!checked_mul(numel, dim, &numel)) {
          return pr.error("shape", "dims whose product fits in int64", to_string_dims(param.shape));
        }
      }
      unit.params.push_back(std::move(param));
    }
    out.push_back(std::move(unit));
  }
  return out;
}

Expected<ManifestShard> parse_shard(const json& value, const CheckpointManifest& m,
                                    std::string_view source, const std::string& path) {
  FSDP_TRY(JsonObjectReader r, JsonObjectReader::make(value, std::string(source), path));
  ManifestShard shard;
  FSDP_TRY(shard.file, r.get_string("file"));
  if (shard.file.empty() || shard.file.find('/') != std::string::npos || shard.file == "." ||
      shard.file == "..") {
    return r.error("file", "a file name in the step directory", describe_json(shard.file));
  }
  FSDP_TRY(shard.rank, r.get_int("rank", 0));
  FSDP_TRY(shard.bytes, r.get_int("bytes", 0));
  FSDP_TRY(std::uint64_t crc, get_unsigned(r, "crc32", 0xFFFFFFFFULL));
  shard.crc32 = static_cast<std::uint32_t>(crc);
  FSDP_TRY(const json* records, r.get_array("records"));
  for (std::size_t k = 0; k < records->size(); ++k) {
    const json& rec = (*records)[k];
    const std::string at = str_cat(r.field_path("records"), "[", k, "]");
    if (!rec.is_array() || rec.size() != 4) {
      return field_error(source, at, "[unit, param, start, numel]", describe_json(rec));
    }
    std::int64_t v[4] = {};
    for (std::size_t i = 0; i < 4; ++i) {
      FSDP_TRY(v[i], json_to_int(rec[i], 0, source, str_cat(at, "[", i, "]")));
    }
    if (v[0] >= static_cast<std::int64_t>(m.units.size()) ||
        v[1] >= static_cast<std::int64_t>(m.units[static_cast<std::size_t>(v[0])].params.size())) {
      return field_error(source, at, "a unit and parameter of the manifest's model",
                         describe_json(rec));
    }
    const std::int64_t numel =
        m.units[static_cast<std::size_t>(v[0])].params[static_cast<std::size_t>(v[1])].numel();
    if (v[2] > numel || v[3] > numel - v[2]) {
      return field_error(source, at, str_cat("a range within the tensor's ", numel, " elements"),
                         describe_json(rec));
    }
    shard.records.push_back(TensorSlice{static_cast<std::int32_t>(v[0]),
                                        static_cast<std::int32_t>(v[1]), Range{v[2], v[3]}});
  }
  return shard;
}

}  // namespace

std::string to_string_dims(const std::vector<std::int64_t>& dims) {
  return str_cat("[", join(dims, ", "), "]");
}

std::int64_t ManifestParam::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    n *= d;  // parse_checkpoint_manifest checked the product
  }
  return n;
}

json to_json(const CheckpointManifest& m) {
  json units = json::array();
  for (const ManifestUnit& u : m.units) {
    json params = json::array();
    for (const ManifestParam& p : u.params) {
      params.push_back({{"name", p.name}, {"shape", p.shape}});
    }
    units.push_back({{"name", u.name}, {"params", std::move(params)}});
  }
  json shards = json::array();
  for (const ManifestShard& s : m.shards) {
    json records = json::array();
    for (const TensorSlice& r : s.records) {
      records.push_back({r.unit, r.param, r.range.start, r.range.numel});
    }
    shards.push_back({{"file", s.file},
                      {"rank", s.rank},
                      {"bytes", s.bytes},
                      {"crc32", s.crc32},
                      {"records", std::move(records)}});
  }
  const SavedConfig& c = m.config;
  const SavedOptimizer& o = m.optimizer;
  const DataPosition& d = m.data;
  return json{{"format", kCheckpointFormat},
              {"version", m.version},
              {"step", m.step},
              {"model", {{"name", m.model_name}, {"units", std::move(units)}}},
              {"saved_with",
               {{"world_size", c.world_size},
                {"mesh", c.mesh},
                {"strategy", c.strategy},
                {"shard_layout", c.shard_layout},
                {"block_size", c.block_size},
                {"tensor_atomic", c.tensor_atomic},
                {"microbatches", c.microbatches},
                {"grad_scale", c.grad_scale}}},
              {"optimizer",
               {{"kind", o.kind},
                {"num_states", o.num_states},
                {"lr", o.lr},
                {"momentum", o.momentum},
                {"beta1", o.beta1},
                {"beta2", o.beta2},
                {"eps", o.eps}}},
              {"data",
               {{"seed", d.seed},
                {"next_step", d.next_step},
                {"samples_per_step", d.samples_per_step},
                {"note",
                 "training samples are a pure function of (seed, global sample index); step "
                 "next_step starts at sample next_step * samples_per_step"}}},
              {"shards", std::move(shards)}};
}

Expected<CheckpointManifest> parse_checkpoint_manifest(std::string_view text,
                                                       std::string_view source) {
  FSDP_TRY(const json doc, parse_json_text(text, source));
  FSDP_TRY(JsonObjectReader top, JsonObjectReader::make(doc, std::string(source), ""));
  FSDP_RETURN_IF_ERROR(top.reject_unknown(
      {"format", "version", "step", "model", "saved_with", "optimizer", "data", "shards"}));
  FSDP_TRY(const std::string format, top.get_string("format"));
  if (format != kCheckpointFormat) {
    return top.error("format", str_cat("'", kCheckpointFormat, "'"), describe_json(format));
  }
  CheckpointManifest m;
  FSDP_TRY(m.version, top.get_int("version", 0));
  if (m.version != kCheckpointVersion) {
    return top.error("version", str_cat(kCheckpointVersion, " (this fsdpsim's format)"),
                     str_cat(m.version));
  }
  FSDP_TRY(m.step, top.get_int("step", 0));
  FSDP_TRY(JsonObjectReader model, object_at(top, "model"));
  FSDP_TRY(m.model_name, model.get_string("name"));
  FSDP_TRY(m.units, parse_units(model));

  FSDP_TRY(JsonObjectReader c, object_at(top, "saved_with"));
  FSDP_TRY(m.config.world_size, c.get_int("world_size", 1));
  FSDP_TRY(m.config.mesh, c.get_string("mesh"));
  FSDP_TRY(m.config.strategy, c.get_string("strategy"));
  FSDP_TRY(m.config.shard_layout, c.get_string("shard_layout"));
  FSDP_TRY(m.config.block_size, c.get_int("block_size", 1));
  FSDP_TRY(m.config.tensor_atomic, c.get_bool_or("tensor_atomic", false));
  FSDP_TRY(m.config.microbatches, c.get_int("microbatches", 1));
  FSDP_TRY(m.config.grad_scale, get_number(c, "grad_scale"));

  FSDP_TRY(JsonObjectReader o, object_at(top, "optimizer"));
  FSDP_TRY(m.optimizer.kind, o.get_string("kind"));
  // Manifests written before 2026-12-04 spell sgd-momentum "sgd_momentum"; the kind is compared
  // by name with the run's (checkpoint.cc), so it is read in today's spelling. An unknown kind
  // stays as written and is reported by that comparison.
  if (const Expected<OptimizerKind> kind = parse_saved_optimizer_kind(m.optimizer.kind)) {
    m.optimizer.kind = std::string(to_string(*kind));
  }
  FSDP_TRY(m.optimizer.num_states, o.get_int("num_states", 0));
  FSDP_TRY(m.optimizer.lr, get_number(o, "lr"));
  FSDP_TRY(m.optimizer.momentum, get_number(o, "momentum"));
  FSDP_TRY(m.optimizer.beta1, get_number(o, "beta1"));
  FSDP_TRY(m.optimizer.beta2, get_number(o, "beta2"));
  FSDP_TRY(m.optimizer.eps, get_number(o, "eps"));

  FSDP_TRY(JsonObjectReader d, object_at(top, "data"));
  FSDP_TRY(m.data.seed, get_unsigned(d, "seed", ~std::uint64_t{0}));
  FSDP_TRY(m.data.next_step, d.get_int("next_step", 0));
  FSDP_TRY(m.data.samples_per_step, d.get_int("samples_per_step", 1));

  FSDP_TRY(const json* shards, top.get_array("shards"));
  for (std::size_t k = 0; k < shards->size(); ++k) {
    FSDP_TRY(ManifestShard shard, parse_shard((*shards)[k], m, source, str_cat("shards[", k, "]")));
    m.shards.push_back(std::move(shard));
  }
  return m;
}

std::string tensor_name(const CheckpointManifest& m, std::int32_t unit, std::int32_t param) {
  if (unit >= 0 && static_cast<std::size_t>(unit) < m.units.size() && param >= 0 &&
      static_cast<std::size_t>(param) < m.units[static_cast<std::size_t>(unit)].params.size()) {
    return m.units[static_cast<std::size_t>(unit)].params[static_cast<std::size_t>(param)].name;
  }
  return str_cat("unit ", unit, " parameter ", param);
}

std::string describe_manifest(const CheckpointManifest& m) {
  std::ostringstream os;
  const SavedConfig& c = m.config;
  const SavedOptimizer& o = m.optimizer;
  std::int64_t params = 0;
  std::int64_t tensors = 0;
  for (const ManifestUnit& u : m.units) {
    for (const ManifestParam& p : u.params) {
      params += p.numel();
      ++tensors;
    }
  }
  os << "format: " << kCheckpointFormat << " version " << m.version << "\n"
     << "step: " << m.step << " (optimizer steps completed)\n"
     << "data: seed " << m.data.seed << ", next step " << m.data.next_step << ", "
     << m.data.samples_per_step << " samples per step (samples are a pure function of seed and "
     << "sample index)\n"
     << "model: " << m.model_name << ", " << m.units.size() << " units, " << tensors << " tensors, "
     << params << " parameters\n"
     << "saved with: " << c.world_size << " ranks, mesh " << c.mesh << ", strategy " << c.strategy
     << ", shard layout " << c.shard_layout << ", block " << c.block_size
     << (c.tensor_atomic ? ", tensor-atomic" : "") << ", microbatches " << c.microbatches
     << ", grad scale " << c.grad_scale << "\n"
     << "optimizer: " << o.kind << " (" << o.num_states << " states per weight), lr " << o.lr
     << ", momentum " << o.momentum << ", beta1 " << o.beta1 << ", beta2 " << o.beta2 << ", eps "
     << o.eps << "\n"
     << "tensors:\n";
  // Columns as wide as their widest entry (hub names run to ~50 characters).
  std::size_t name_width = 0;
  std::size_t shape_width = 0;
  for (const ManifestUnit& u : m.units) {
    for (const ManifestParam& p : u.params) {
      name_width = std::max(name_width, p.name.size());
      shape_width = std::max(shape_width, to_string_dims(p.shape).size());
    }
  }
  for (const ManifestUnit& u : m.units) {
    for (const ManifestParam& p : u.params) {
      os << "  " << std::left << std::setw(static_cast<int>(name_width)) << p.name << "  "
         << std::setw(static_cast<int>(shape_width)) << to_string_dims(p.shape) << "  unit "
         << u.name << "\n";
    }
  }
  os << "shards:\n";
  for (const ManifestShard& s : m.shards) {
    std::int64_t elements = 0;
    for (const TensorSlice& r : s.records) {
      elements += r.range.numel;
    }
    os << "  " << s.file << ": rank " << s.rank << ", " << s.bytes << " bytes, crc32 0x" << std::hex
       << std::setw(8) << std::setfill('0') << s.crc32 << std::dec << std::setfill(' ') << ", "
       << s.records.size() << " records, " << elements << " elements\n";
  }
  return os.str();
}

}  // namespace fsdp::exec
