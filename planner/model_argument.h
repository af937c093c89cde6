// SPDX-License-Identifier: Apache-2.0
// The --model argument of every command (a preset name, a hub config.json or an fsdpsim model
// file) with the size overrides that shrink it (--layers, --hidden, --ffn, --heads, --kv-heads,
// --vocab): `fsdpsim simulate`, `schedule`, `train` and the Python package given the same model
// and sizes describe one network (core/model/hub_arch.h).
#pragma once

#include <string>

#include "core/base/expected.h"
#include "core/model/hub_arch.h"
#include "core/model/model.h"
#include "core/model/model_split.h"

namespace fsdp::planner {

// The architecture of a preset name (fsdpsim model --list) or a hub config.json file. *name gets
// the preset name, or the config's _name_or_path, or the file name without ".json". An fsdpsim
// model file is an error (it lists tensors, not an architecture that sizes could change).
Expected<HubArch> load_arch_argument(const std::string& text, std::string* name);

// A preset name or a path to a hub config.json / fsdpsim model file, with `sizes` applied and
// split for a mesh's tp and ep axes (both need a preset or a hub config: the rank-local model of
// core/model/hub_config.h). Errors name the option (--model, --layers, ...).
Expected<Model> load_model_argument(const std::string& text, const HubOverrides& sizes = {},
                                    const ModelSplit& split = ModelSplit());

}  // namespace fsdp::planner
