// SPDX-License-Identifier: Apache-2.0
// The save and load protocols of docs/design/backends.md, "Checkpoints".
#include "backends/exec/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "backends/exec/checkpoint_shard.h"
#include "core/base/file_io.h"
#include "core/base/strings.h"

namespace fsdp::exec {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kManifestFile = "manifest.json";
constexpr std::string_view kLatestFile = "latest";
constexpr std::int64_t kMaxLatestBytes = 4096;

std::string step_name(std::int64_t step) {
  return str_cat("step-", step);
}
std::string shard_file_name(std::int64_t rank) {
  return str_cat("rank-", rank, ".bin");
}

Error io_error(const std::string& path, std::string_view what) {
  return Error(ErrorCode::kInvalidArgument, str_cat(path, ": ", what));
}

// fsync of a directory, so a rename inside it is durable.
Status sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return io_error(dir, str_cat("cannot open the directory: ", std::strerror(errno)));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL && err != EROFS) {
    return io_error(dir, str_cat("cannot sync the directory: ", std::strerror(err)));
  }
  return ok_status();
}

Status make_dirs(const std::string& dir) {
  // Every rank creates the same directory at once: losing that race is no error.
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::error_code is_dir_ec;
  if (!fs::is_directory(dir, is_dir_ec)) {
    return io_error(dir, str_cat("cannot create the directory: ",
                                 ec ? ec.message() : "it exists and is not a directory"));
  }
  return ok_status();
}

// Both sides of the rendezvous: every rank reports whether it failed; the count of failures.
Expected<std::int64_t> count_failures(Executor& executor, bool failed) {
  FSDP_TRY(const double sum, executor.sum_over_ranks(failed ? 1.0 : 0.0));
  return static_cast<std::int64_t>(sum + 0.5);
}

// This rank's error, or (when it succeeded but `failures` ranks did not) one saying so.
Status agree(Executor& executor, Status mine, std::int64_t rank, std::string_view what) {
  Expected<std::int64_t> failures = count_failures(executor, !mine.ok());
  if (!mine.ok()) {
    return mine;
  }
  if (!failures) {
    return failures.error();
  }
  if (*failures > 0) {
    // kUnavailable: an echo of a peer's failure, which first_failure (trainer.h) reports
    // after any rank's own error.
    return Error(ErrorCode::kUnavailable,
                 str_cat("rank ", rank, ": ", *failures, " other rank(s) failed ", what,
                         " (their errors name the file)"));
  }
  return ok_status();
}

// Rank 0's part after every shard is on disk: the manifest, then the rename and `latest`.
Status finish_save(const std::string& dir, const std::string& tmp, std::int64_t step,
                   const CheckpointContext& ctx, std::int64_t num_states) {
  CheckpointManifest m;
  m.step = step;
  m.model_name = ctx.model->name();
  for (const Unit& u : ctx.model->units()) {
    ManifestUnit mu{u.name(), {}};
    for (const Param& p : u.params()) {
      const auto dims = p.shape().dims();
      mu.params.push_back(ManifestParam{p.name(), {dims.begin(), dims.end()}});
    }
    m.units.push_back(std::move(mu));
  }
  m.config = ctx.config;
  m.optimizer = ctx.optimizer;
  m.optimizer.num_states = num_states;
  m.data = DataPosition{ctx.seed, step, ctx.samples_per_step};
  for (std::int64_t r = 0; r < ctx.config.world_size; ++r) {
    const std::string path = (fs::path(tmp) / shard_file_name(r)).string();
    FSDP_TRY(const FileDigest digest, digest_file(path));
    FSDP_TRY(const ShardIndex index, read_shard_index(path, digest.bytes));
    ManifestShard shard{shard_file_name(r), r, digest.bytes, digest.crc32, {}};
    for (const ShardRecordIndex& rec : index.records) {
      shard.records.push_back(rec.slice);
    }
    m.shards.push_back(std::move(shard));
  }
  FSDP_RETURN_IF_ERROR(
      write_output_file((fs::path(tmp) / kManifestFile).string(), to_json(m).dump(1) + "\n"));
  FSDP_RETURN_IF_ERROR(sync_dir(tmp));
  const std::string final_dir = (fs::path(dir) / step_name(step)).string();
  std::error_code ec;
  std::optional<std::string> old;
  if (fs::exists(final_dir, ec)) {
    // A step saved before (e.g. a rerun): moved aside, replaced, then removed.
    old = str_cat(final_dir, ".old-", ::getpid());
    fs::remove_all(*old, ec);
    if (::rename(final_dir.c_str(), old->c_str()) != 0) {
      return io_error(final_dir, str_cat("cannot move the old step aside: ", std::strerror(errno)));
    }
  }
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    return io_error(tmp, str_cat("cannot rename to ", final_dir, ": ", std::strerror(errno)));
  }
  FSDP_RETURN_IF_ERROR(sync_dir(dir));
  FSDP_RETURN_IF_ERROR(
      write_output_file((fs::path(dir) / kLatestFile).string(), step_name(step) + "\n"));
  FSDP_RETURN_IF_ERROR(sync_dir(dir));
  if (old) {
    fs::remove_all(*old, ec);
  }
  return ok_status();
}

std::string dims_text(std::span<const std::int64_t> dims) {
  return to_string_dims(std::vector<std::int64_t>(dims.begin(), dims.end()));
}

// The manifest against the model and run it is loaded into.
Status check_manifest(const CheckpointManifest& m, const CheckpointContext& ctx,
                      std::int64_t num_states, const std::string& source) {
  const std::vector<Unit>& units = ctx.model->units();
  const auto mismatch = [&](std::string_view what) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(source, ": checkpoint of another model: ", what));
  };
  for (std::size_t u = 0; u < std::max(units.size(), m.units.size()); ++u) {
    if (u >= m.units.size()) {
      return mismatch(str_cat("it has ", m.units.size(), " units; the model's unit '",
                              units[u].name(), "' is missing"));
    }
    if (u >= units.size()) {
      return mismatch(str_cat("its unit '", m.units[u].name, "' is not in the model (",
                              units.size(), " units)"));
    }
    const ManifestUnit& mu = m.units[u];
    if (mu.name != units[u].name()) {
      return mismatch(
          str_cat("unit ", u, " is '", mu.name, "'; the model's is '", units[u].name(), "'"));
    }
    const std::vector<Param>& params = units[u].params();
    for (std::size_t p = 0; p < std::max(params.size(), mu.params.size()); ++p) {
      if (p >= mu.params.size()) {
        return mismatch(
            str_cat("tensor '", params[p].name(), "' of unit '", mu.name, "' is missing"));
      }
      if (p >= params.size()) {
        return mismatch(str_cat("tensor '", mu.params[p].name, "' is not in unit '", mu.name,
                                "' of the model"));
      }
      if (mu.params[p].name != params[p].name()) {
        return mismatch(str_cat("parameter ", p, " of unit '", mu.name, "' is '", mu.params[p].name,
                                "'; the model's is '", params[p].name(), "'"));
      }
      const auto dims = params[p].shape().dims();
      if (!std::equal(dims.begin(), dims.end(), mu.params[p].shape.begin(),
                      mu.params[p].shape.end())) {
        return mismatch(str_cat("tensor '", params[p].name(), "' has shape ",
                                to_string_dims(mu.params[p].shape), "; the model's is ",
                                dims_text(dims)));
      }
    }
  }
  if (m.optimizer.kind != ctx.optimizer.kind || m.optimizer.num_states != num_states) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(source, ": the checkpoint holds ", m.optimizer.kind, " state (",
                         m.optimizer.num_states, " values per weight); this run uses ",
                         ctx.optimizer.kind, " (", num_states, ")"));
  }
  if (m.data.seed != ctx.seed) {
    return Error(
        ErrorCode::kInvalidArgument,
        str_cat(source, ": the checkpoint's data seed is ", m.data.seed, "; this run's --seed is ",
                ctx.seed, " (the samples would not continue the saved run's)"));
  }
  if (m.data.samples_per_step != ctx.samples_per_step) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(source, ": the checkpoint's run took ", m.data.samples_per_step,
                         " samples per step; this run takes ", ctx.samples_per_step,
                         " (ranks x microbatches x micro-batch size must stay the same for the "
                         "data to continue)"));
  }
  if (m.data.next_step != m.step) {
    return Error(ErrorCode::kInvalidArgument, str_cat(source, ": data position ", m.data.next_step,
                                                      " differs from step ", m.step));
  }
  return ok_status();
}

bool overlaps(const TensorSlice& a, const TensorSlice& b) {
  return a.unit == b.unit && a.param == b.param && a.range.start < b.range.end() &&
         b.range.start < a.range.end();
}

// This rank's part of a load: everything short of the agreement.
Expected<ExecutorState> read_state(const std::string& path, const CheckpointContext& ctx,
                                   Executor& executor, std::int64_t* step) {
  FSDP_TRY(const std::string step_dir, resolve_checkpoint_step(path));
  FSDP_TRY(const CheckpointManifest m, read_checkpoint_manifest(step_dir));
  const std::string manifest_path = (fs::path(step_dir) / kManifestFile).string();
  FSDP_RETURN_IF_ERROR(check_manifest(m, ctx, executor.num_states(), manifest_path));
  const std::vector<TensorSlice> wanted = executor.local_slices();
  ExecutorState state;
  state.steps_done = m.step;
  state.num_states = executor.num_states();
  for (const ManifestShard& s : m.shards) {
    const std::string file = (fs::path(step_dir) / s.file).string();
    // Every listed file is checked, needed or not, so each rank reports a broken one. The
    // manifest says what the file holds, which names a tensor even when it is gone.
    const std::string holds =
        s.records.empty()
            ? std::string("it holds no records")
            : str_cat("it holds tensor '", tensor_name(m, s.records[0].unit, s.records[0].param),
                      "' elements [", s.records[0].range.start, ", ", s.records[0].range.end(), ")",
                      s.records.size() > 1 ? " and more" : "");
    Expected<ShardIndex> index = read_shard_index(file, s.bytes);
    if (!index) {
      return Error(index.error().code(), str_cat(index.error().message(), "; ", holds));
    }
    bool same = index->records.size() == s.records.size() && index->steps_done == m.step;
    for (std::size_t k = 0; same && k < s.records.size(); ++k) {
      same = index->records[k].slice == s.records[k];
    }
    if (!same) {
      return io_error(file, str_cat("the record index differs from the manifest's; ", holds));
    }
    for (const ShardRecordIndex& rec : index->records) {
      bool needed = false;
      for (const TensorSlice& w : wanted) {
        needed = needed || overlaps(rec.slice, w);
      }
      if (!needed) {
        continue;
      }
      const std::string name = tensor_name(m, rec.slice.unit, rec.slice.param);
      if (rec.num_states != (m.optimizer.num_states == 0 ? 0 : m.optimizer.num_states) &&
          rec.num_states != 0) {
        return io_error(file,
                        str_cat("the record of tensor '", name, "' holds ", rec.num_states,
                                " states per weight; the manifest says ", m.optimizer.num_states));
      }
      FSDP_TRY(TensorShard shard, read_shard_record(file, rec, name));
      state.shards.push_back(std::move(shard));
    }
  }
  // Coverage, with the tensor's name (import_state checks again by index).
  for (const TensorSlice& w : wanted) {
    std::vector<Range> have;
    for (const TensorShard& s : state.shards) {
      if (overlaps(s.slice, w)) {
        have.push_back(s.slice.range);
      }
    }
    std::sort(have.begin(), have.end(),
              [](const Range& a, const Range& b) { return a.start < b.start; });
    std::int64_t next = w.range.start;
    for (const Range& r : have) {
      if (r.start > next) {
        break;
      }
      next = std::max(next, r.end());
    }
    if (next < w.range.end()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(step_dir, ": no shard file holds elements [", next, ", ", w.range.end(),
                           ") of tensor '", tensor_name(m, w.unit, w.param),
                           "' (the manifest's records do not cover it)"));
    }
  }
  *step = m.step;
  return state;
}

}  // namespace

Expected<std::string> resolve_checkpoint_step(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(path) / kManifestFile, ec)) {
    return path;
  }
  const std::string latest = (fs::path(path) / kLatestFile).string();
  if (!fs::exists(latest, ec)) {
    return io_error(path, str_cat("not a checkpoint: neither ", kManifestFile, " nor ", kLatestFile,
                                  " is there"));
  }
  FSDP_TRY(const std::string text, read_input_file(latest, kMaxLatestBytes));
  const std::string_view name = trim(text);
  bool valid = name.size() > 5 && name.substr(0, 5) == "step-";
  for (std::size_t i = 5; valid && i < name.size(); ++i) {
    valid = name[i] >= '0' && name[i] <= '9';
  }
  if (!valid) {
    return io_error(latest, str_cat("names '", name, "'; expected step-<N>"));
  }
  const std::string step_dir = (fs::path(path) / std::string(name)).string();
  if (!fs::is_regular_file(fs::path(step_dir) / kManifestFile, ec)) {
    return io_error(latest, str_cat("names ", name, ", which has no ", kManifestFile));
  }
  return step_dir;
}

Expected<CheckpointManifest> read_checkpoint_manifest(const std::string& step_dir) {
  const std::string path = (fs::path(step_dir) / kManifestFile).string();
  FSDP_TRY(const std::string text, read_input_file(path));
  return parse_checkpoint_manifest(text, path);
}

Status save_checkpoint(const std::string& dir, const CheckpointContext& ctx, Executor& executor,
                       std::int64_t rank) {
  const std::int64_t step = executor.steps_done();
  const std::string tmp = (fs::path(dir) / str_cat(step_name(step), ".tmp-save")).string();
  Status wrote = [&]() -> Status {
    FSDP_TRY(const ExecutorState state, executor.export_state());
    FSDP_RETURN_IF_ERROR(make_dirs(tmp));
    return write_output_file((fs::path(tmp) / shard_file_name(rank)).string(),
                             encode_shard_file(rank, state));
  }();
  const std::string what = str_cat("to write their shard of ", step_name(step));
  FSDP_RETURN_IF_ERROR(agree(executor, std::move(wrote), rank, what));
  Status finished = ok_status();
  if (rank == 0) {
    finished = finish_save(dir, tmp, step, ctx, executor.num_states());
  }
  return agree(executor, std::move(finished), rank, str_cat("to finish ", step_name(step)));
}

Expected<std::int64_t> load_checkpoint(const std::string& path, const CheckpointContext& ctx,
                                       Executor& executor, std::int64_t rank) {
  std::int64_t step = 0;
  Status mine = [&]() -> Status {
    FSDP_TRY(const ExecutorState state, read_state(path, ctx, executor, &step));
    return executor.import_state(state);
  }();
  FSDP_RETURN_IF_ERROR(agree(executor, std::move(mine), rank, str_cat("to load ", path)));
  return step;
}

}  // namespace fsdp::exec
