// SPDX-License-Identifier: Apache-2.0
// fsdpsim._core: the nanobind extension behind `import fsdpsim` (python/fsdpsim/__init__.py).
// It calls what the CLI calls (planner/step_report.h, planner/plan.h) on options filled by
// name: every keyword is a CLI option in snake_case with the CLI's default, and every error is
// the CLI's one-line message raised as ValueError (docs/user-guide.md, "From Python").
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "core/layout/layout_builder.h"
#include "core/layout/shard_layout.h"
#include "planner/plan.h"
#include "planner/run_options.h"
#include "planner/sim_args.h"
#include "planner/step_report.h"
#include "sim/report/sim_report.h"
#include "viz/svg_memory_plot.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;

namespace fsdp::python {
namespace {

[[noreturn]] void raise_value_error(const std::string& message) {
  throw nb::value_error(message.c_str());
}

// The CLI's spelling of a keyword: seq_len -> --seq-len.
std::string option_name(const std::string& keyword) {
  std::string out = "--" + keyword;
  for (char& c : out) {
    if (c == '_') {
      c = '-';
    }
  }
  return out;
}

std::string repr_of(nb::handle value) {
  return nb::cast<std::string>(nb::repr(value));
}

// Boost.Program_options' message for a value it cannot read, as the CLI prints it.
[[noreturn]] void raise_invalid(const std::string& keyword, nb::handle value,
                                const char* expected) {
  raise_value_error(str_cat("the argument (", repr_of(value), ") for option '",
                            option_name(keyword), "' is invalid; expected ", expected));
}

std::string as_text(const std::string& keyword, nb::handle value) {
  if (!nb::isinstance<nb::str>(value)) {
    raise_invalid(keyword, value, "a str");
  }
  auto text = nb::cast<std::string>(value);
  if (text.empty()) {
    raise_value_error(str_cat(option_name(keyword),
                              " has an empty value; expected a value (or leave the option out "
                              "for its default)"));
  }
  return text;
}

std::int64_t as_int(const std::string& keyword, nb::handle value) {
  if (nb::isinstance<nb::bool_>(value) || !nb::isinstance<nb::int_>(value)) {
    raise_invalid(keyword, value, "an int");
  }
  try {
    return nb::cast<std::int64_t>(value);
  } catch (const std::exception&) {
    raise_invalid(keyword, value, "an int of 64 bits");
  }
}

double as_double(const std::string& keyword, nb::handle value) {
  if (nb::isinstance<nb::bool_>(value) ||
      !(nb::isinstance<nb::int_>(value) || nb::isinstance<nb::float_>(value))) {
    raise_invalid(keyword, value, "a number");
  }
  return nb::cast<double>(value);
}

bool as_bool(const std::string& keyword, nb::handle value) {
  if (!nb::isinstance<nb::bool_>(value)) {
    raise_invalid(keyword, value, "True or False");
  }
  return nb::cast<bool>(value);
}

// What the keywords of one call fill, and which were given (for the conflicts the CLI refuses).
struct Options {
  planner::RunOptions run;
  planner::SimArgs sim;
  std::map<std::string, bool> given;
};

using Setter = std::function<void(Options&, const std::string&, nb::handle)>;

// The RunOptions keywords (cli/run_options.cc's options) and the model size options.
void add_run_setters(std::map<std::string, Setter>& s) {
  auto text = [](std::string planner::RunOptions::*field) -> Setter {
    return
        [field](Options& o, const std::string& k, nb::handle v) { o.run.*field = as_text(k, v); };
  };
  auto count = [](std::int64_t planner::RunOptions::*field) -> Setter {
    return [field](Options& o, const std::string& k, nb::handle v) { o.run.*field = as_int(k, v); };
  };
  auto flag = [](bool planner::RunOptions::*field) -> Setter {
    return
        [field](Options& o, const std::string& k, nb::handle v) { o.run.*field = as_bool(k, v); };
  };
  auto size = [](std::optional<std::int64_t> HubOverrides::*field) -> Setter {
    return [field](Options& o, const std::string& k, nb::handle v) {
      o.run.sizes.*field = as_int(k, v);
    };
  };
  using R = planner::RunOptions;
  s["model"] = text(&R::model);
  s["mesh"] = text(&R::mesh);
  s["strategy"] = text(&R::strategy);
  s["microbatches"] = count(&R::microbatches);
  s["shard_layout"] = text(&R::shard_layout);
  s["block"] = count(&R::block);
  s["prefetch"] = [](Options& o, const std::string& k, nb::handle v) {
    o.run.forward_prefetch = as_text(k, v);
    o.run.backward_prefetch = o.run.forward_prefetch;
  };
  s["forward_prefetch"] = text(&R::forward_prefetch);
  s["backward_prefetch"] = text(&R::backward_prefetch);
  s["max_inflight_all_gathers"] = count(&R::max_inflight);
  s["unified_streams"] = flag(&R::unified_streams);
  s["recompute"] = text(&R::recompute);
  s["tensor_atomic"] = flag(&R::tensor_atomic);
  s["main_params"] = text(&R::main_params);
  s["optimizer"] = text(&R::optimizer);
  s["grad_scale"] = [](Options& o, const std::string& k, nb::handle v) {
    o.run.grad_scale = as_double(k, v);
  };
  s["seq_len"] = count(&R::seq_len);
  s["micro_batch_size"] = count(&R::micro_batch_size);
  s["compile"] = flag(&R::compile);
  s["compute_dtype"] = text(&R::compute_dtype);
  s["kernels"] = text(&R::kernels);
  s["param_dtype"] = text(&R::param_dtype);
  s["reduce_dtype"] = text(&R::reduce_dtype);
  s["fp8_all_gather"] = flag(&R::fp8_all_gather);
  s["framework"] = text(&R::framework);
  s["reshard_after_forward"] = text(&R::reshard_after_forward);
  s["sequence_parallel"] = flag(&R::sequence_parallel);
  s["capacity_factor"] = [](Options& o, const std::string& k, nb::handle v) {
    o.run.capacity_factor = as_double(k, v);
  };
  s["layers"] = size(&HubOverrides::layers);
  s["hidden"] = size(&HubOverrides::hidden);
  s["ffn"] = size(&HubOverrides::ffn);
  s["heads"] = size(&HubOverrides::heads);
  s["kv_heads"] = size(&HubOverrides::kv_heads);
  s["vocab"] = size(&HubOverrides::vocab);
}

// The SimArgs keywords (cli/simulate_command.cc's simulator options).
void add_sim_setters(std::map<std::string, Setter>& s) {
  s["hardware"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.hardware = as_text(k, v);
  };
  s["compute_model"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.compute_model = as_text(k, v);
    o.sim.compute_model_given = true;
  };
  s["matmul_efficiency"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.matmul_efficiency = as_double(k, v);
  };
  s["memory_efficiency"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.memory_efficiency = as_double(k, v);
  };
  s["link_efficiency"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.link_efficiency = as_double(k, v);
  };
  s["straggler"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.straggler = as_text(k, v);
  };
  s["no_contention"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.no_contention = as_bool(k, v);
  };
  s["sm_slowdown"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.sm_slowdown = as_double(k, v);
  };
  s["all_reduce"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.all_reduce = as_text(k, v);
  };
  s["min_message_bytes"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.min_message_bytes = as_int(k, v);
  };
  s["uneven"] = [](Options& o, const std::string& k, nb::handle v) {
    o.sim.uneven = as_text(k, v);
  };
}

const std::map<std::string, Setter>& simulate_setters() {
  static const auto* setters = [] {
    auto* s = new std::map<std::string, Setter>();
    add_run_setters(*s);
    add_sim_setters(*s);
    return s;
  }();
  return *setters;
}

// Fills `o` from the keywords; an unknown keyword is refused as the CLI refuses an unknown option.
void apply(const char* call, const std::map<std::string, Setter>& setters, nb::dict keywords,
           Options& o) {
  for (auto [key, value] : keywords) {
    const auto keyword = nb::cast<std::string>(key);
    const auto it = setters.find(keyword);
    if (it == setters.end()) {
      raise_value_error(str_cat(call, "() got an unknown keyword '", keyword,
                                "': unrecognised option '", option_name(keyword), "'"));
    }
    if (value.is_none()) {
      continue;  // None: the option left out, its default applies
    }
    it->second(o, keyword, value);
    o.given[keyword] = true;
  }
}

// The conflicts the CLI refuses between options given together (cli/run_options.cc,
// run_option_conflict; docs/cli.md, "Command lines"), in its words.
void refuse_conflicts(const Options& o) {
  for (const char* one : {"forward_prefetch", "backward_prefetch"}) {
    if (o.given.count("prefetch") != 0 && o.given.count(one) != 0) {
      raise_value_error(str_cat("--prefetch sets both directions and conflicts with ",
                                option_name(one),
                                "; give --forward-prefetch and --backward-prefetch instead"));
    }
  }
  if (o.run.tensor_atomic && o.run.shard_layout == "unpadded") {
    raise_value_error(
        "--tensor-atomic places whole tensors and conflicts with --shard-layout unpadded");
  }
  if (o.run.tensor_atomic && o.run.block != 1) {
    raise_value_error(str_cat("--tensor-atomic places whole tensors and conflicts with --block ",
                              o.run.block, "; expected --block 1 or no --block"));
  }
}

// One simulated step and the options that made it (a trace re-simulates with recording on: the
// simulator is deterministic, so the recorded step is the same step).
class Step {
 public:
  Step(planner::SimulatedStep step, planner::SimArgs sim, double seconds)
      : step_(std::move(step)), sim_(std::move(sim)), seconds_(seconds) {}

  const planner::SimulatedStep& step() const { return step_; }
  // The wall time simulate_step took inside C++ (what the binding's overhead is measured against).
  double simulate_seconds() const { return seconds_; }

  std::string json_text() const { return planner::step_report_json(step_).dump(); }
  std::string text() const { return planner::step_report_text(step_); }

  void save_trace(const std::string& path) {
    write(path, sim::chrome_trace(recorded().result, recorded().schedule).dump() + "\n");
  }
  void save_memory_plot(const std::string& path) {
    const auto& r = recorded();
    write(path, viz::render_memory_svg(r.result, r.schedule, r.hardware));
  }

 private:
  const planner::SimulatedStep& recorded() {
    if (sim_.record_trace) {
      return step_;
    }
    sim_.record_trace = true;
    Expected<planner::SimulatedStep> again = [&] {
      nb::gil_scoped_release release;
      return planner::simulate_step(step_.options, sim_);
    }();
    if (!again) {
      raise_value_error(again.error().message());
    }
    step_ = std::move(*again);
    return step_;
  }
  static void write(const std::string& path, const std::string& content) {
    std::ofstream out(path, std::ios::binary);
    out << content;
    if (!out.flush()) {
      throw nb::builtin_exception(nb::exception_type::runtime_error,
                                  str_cat("cannot write '", path, "'").c_str());
    }
  }

  planner::SimulatedStep step_;
  planner::SimArgs sim_;
  double seconds_ = 0;
};

Step simulate(nb::dict keywords) {
  Options o;
  // `fsdpsim simulate`'s own defaults (cli/simulate_command.cc).
  o.run.mesh = "dp=16";
  o.run.microbatches = 4;
  apply("simulate", simulate_setters(), keywords, o);
  refuse_conflicts(o);
  double seconds = 0;
  Expected<planner::SimulatedStep> step = [&] {
    nb::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    auto simulated = planner::simulate_step(o.run, o.sim);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return simulated;
  }();
  if (!step) {
    raise_value_error(step.error().message());
  }
  return Step(std::move(*step), o.sim, seconds);
}

// Text lists as `fsdpsim plan` reads them (cli/plan_command.cc): str items, or ints in a range.
std::vector<std::string> word_list(const std::string& keyword, nb::handle value) {
  std::vector<std::string> out;
  for (nb::handle item : nb::iter(value)) {
    out.push_back(as_text(keyword, item));
  }
  return out;
}
std::vector<std::int64_t> count_list(const std::string& keyword, nb::handle value,
                                     std::int64_t least, std::int64_t most) {
  std::vector<std::int64_t> out;
  for (nb::handle item : nb::iter(value)) {
    const std::int64_t v = as_int(keyword, item);
    if (v < least || v > most) {
      raise_value_error(str_cat(option_name(keyword), " item '", v, "': expected an integer in [",
                                least, ", ", most, "]"));
    }
    out.push_back(v);
  }
  return out;
}

// `fsdpsim plan --format json` of the keywords, as JSON text; run with the GIL released.
std::string plan(nb::dict keywords) {
  planner::PlanRequest req;
  std::map<std::string, Setter> setters;
  add_run_setters(setters);
  add_sim_setters(setters);
  // The planner chooses these (planner/plan.h, PlanRequest::base); they are not plan's options.
  for (const char* chosen : {"mesh", "strategy", "microbatches", "micro_batch_size",
                             "forward_prefetch", "backward_prefetch", "sequence_parallel"}) {
    setters.erase(chosen);
  }
  setters["gpus"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.gpus = as_int(k, v);
  };
  setters["global_batch_tokens"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.global_batch_tokens = as_int(k, v);
  };
  setters["strategies"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.strategies = word_list(k, v);
  };
  setters["tp"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.tp_sizes = count_list(k, v, 1, 1 << 20);
  };
  setters["ep"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.ep_sizes = count_list(k, v, 1, 1 << 20);
  };
  setters["recompute"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.recompute = word_list(k, v);
  };
  setters["reshard_after_forward"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.reshard = word_list(k, v);
    for (const std::string& item : req.reshard) {
      if (item != "all" && item != "all-but-last" && item != "none") {
        raise_value_error(str_cat("--reshard-after-forward item '", item,
                                  "': expected all, all-but-last or none"));
      }
    }
  };
  setters["prefetch"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.prefetch = count_list(k, v, 0, 64);
  };
  setters["max_micro_batch_size"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.max_micro_batch_size = as_int(k, v);
  };
  setters["top"] = [&req](Options&, const std::string& k, nb::handle v) { req.top = as_int(k, v); };
  setters["jobs"] = [&req](Options&, const std::string& k, nb::handle v) {
    const std::int64_t jobs = as_int(k, v);
    if (jobs < 0 || jobs > 4096) {
      raise_value_error(str_cat("--jobs is ", jobs, "; expected >= 0 (0: one per core)"));
    }
    req.jobs = static_cast<int>(jobs);
  };
  setters["dry_run"] = [&req](Options&, const std::string& k, nb::handle v) {
    req.dry_run = as_bool(k, v);
  };
  Options o;
  apply("plan", setters, keywords, o);
  if (o.given.count("gpus") == 0) {
    raise_value_error("the job's size is missing: give --gpus N or --nodes N");
  }
  if (o.given.count("global_batch_tokens") == 0) {
    raise_value_error(
        "the global batch is missing: give --global-batch-tokens T or --global-batch-size B");
  }
  if (req.jobs == 0) {
    req.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  req.base = o.run;
  req.sim = o.sim;
  Expected<planner::PlanResult> result = [&] {
    nb::gil_scoped_release release;
    return planner::run_plan(req, {}, {});
  }();
  if (!result) {
    raise_value_error(result.error().message());
  }
  return planner::plan_report_json(req, *result).dump();
}

// The layout builders of core/layout/layout_builder.h (the reference's layout_builder API,
// docs/user-guide.md, "From Python"): shapes as lists of ints; the layout as a dict of the
// reference GlobalLayout's fields.
std::vector<Shape> shapes_of(const std::vector<std::vector<std::int64_t>>& dims) {
  std::vector<Shape> shapes;
  shapes.reserve(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    auto shape = Shape::make(std::span<const std::int64_t>(dims[i]));
    if (!shape) {
      raise_value_error(str_cat("shapes[", i, "]: ", shape.error().message()));
    }
    shapes.push_back(*shape);
  }
  return shapes;
}

nb::dict layout_dict(Expected<GlobalLayout> layout) {
  if (!layout) {
    raise_value_error(layout.error().message());
  }
  nb::list shapes;
  for (const Shape& shape : layout->tensor_shapes()) {
    nb::list dims;
    for (std::int64_t d : shape.dims()) {
      dims.append(d);
    }
    shapes.append(nb::tuple(dims));
  }
  nb::dict out;
  out["tensor_shapes"] = shapes;
  out["tensor_to_offset"] = nb::cast(layout->tensor_to_offset());
  out["rank_to_offset"] = nb::cast(layout->rank_to_offset());
  out["size"] = layout->size();
  return out;
}

nb::dict row_atomic_layout(const std::vector<std::vector<std::int64_t>>& dims, std::int64_t dp_size,
                           std::int64_t block_size, const std::string& shard_layout) {
  auto kind = parse_shard_layout(shard_layout);
  if (!kind) {
    raise_value_error(str_cat("shard_layout: ", kind.error().message()));
  }
  return layout_dict(build_row_atomic_layout(shapes_of(dims), dp_size, block_size, *kind));
}

}  // namespace
}  // namespace fsdp::python

NB_MODULE(_core, m) {
  using fsdp::python::Step;
  m.doc() = "fsdpsim's simulator and planner (use the fsdpsim package, not this module)";
  nb::class_<Step>(m, "Step")
      .def_prop_ro("step_time_s", [](const Step& s) { return s.step().throughput.step_time_s; })
      .def_prop_ro("tokens_per_second_per_gpu",
                   [](const Step& s) { return s.step().throughput.tokens_per_second_per_gpu; })
      .def_prop_ro("tflops_per_gpu",
                   [](const Step& s) { return s.step().throughput.tflops_per_gpu; })
      .def_prop_ro("mfu", [](const Step& s) { return s.step().throughput.mfu; })
      .def_prop_ro("fits", [](const Step& s) { return s.step().memory.fits; })
      .def_prop_ro("headroom_bytes", [](const Step& s) { return s.step().memory.headroom_bytes; })
      .def_prop_ro("peak_allocated_bytes",
                   [](const Step& s) { return s.step().memory.peak_allocated_bytes; })
      .def_prop_ro("peak_reserved_bytes",
                   [](const Step& s) { return s.step().memory.peak_reserved_bytes; })
      .def_prop_ro("device_bytes", [](const Step& s) { return s.step().memory.device_bytes; })
      .def_prop_ro("simulate_seconds", &Step::simulate_seconds)
      .def("json_text", &Step::json_text)
      .def("text", &Step::text)
      .def("save_trace", &Step::save_trace)
      .def("save_memory_plot", &Step::save_memory_plot);
  m.def("simulate", &fsdp::python::simulate,
        "simulate(options: dict) -> Step; the keywords of fsdpsim.simulate");
  m.def("build_row_atomic_layout", &fsdp::python::row_atomic_layout);
  m.def("build_for_row_atomic", [](const std::vector<std::vector<std::int64_t>>& dims,
                                   std::int64_t dp_size, std::int64_t block_size) {
    return fsdp::python::layout_dict(
        fsdp::build_for_row_atomic(fsdp::python::shapes_of(dims), dp_size, block_size));
  });
  m.def("build_for_row_atomic_unpadding", [](const std::vector<std::vector<std::int64_t>>& dims,
                                             std::int64_t dp_size, std::int64_t block_size) {
    return fsdp::python::layout_dict(
        fsdp::build_for_row_atomic_unpadding(fsdp::python::shapes_of(dims), dp_size, block_size));
  });
  m.def("build_for_tensor_atomic",
        [](const std::vector<std::vector<std::int64_t>>& dims, std::int64_t dp_size,
           const std::vector<std::int64_t>& owners) {
          return fsdp::python::layout_dict(
              fsdp::build_for_tensor_atomic(fsdp::python::shapes_of(dims), dp_size, owners));
        });
  m.def("plan", &fsdp::python::plan,
        "plan(options: dict) -> str; `fsdpsim plan --format json` as JSON text");
}
