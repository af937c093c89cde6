#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fail on an #include that runs upward through the layers of docs/design.md ("Layers").

Every .cc, .h and .cu file under the repository (build/ and hidden folders excluded) belongs to
the layer whose folder is the longest prefix of its path (LAYERS in this script). A file may
include:

* headers of its own layer and of every layer below it (LAYERS gives the layers directly below;
  "below" is their transitive closure, so peers such as core/hardware and core/api, or sim and
  the backends, may not include each other);
* an `internal/` header only from the folder that holds that internal/ folder (or from tests);
* CUDA, cuBLAS or NCCL headers only from backends/cuda (and its tests, tests/backends/cuda).

A quoted include naming a file of the repository (from its root, or failing that from the
including file's folder) is checked; one that names no file of it (a third-party header) is not.
A source file in no layer is an error too: a new folder under core/ would not be built by any
target of core/CMakeLists.txt.

It also checks core/CMakeLists.txt against the includes: each fsdp_core_layer(NAME ...) call must
link exactly the core layers that the files of core/NAME include (a missing link still builds
through a neighbour's link, so nothing else would notice).

One line per violation, `file:line: includes X (layer L) from layer M`; exit status 1 if there is
any, 0 otherwise.

Examples:
  scripts/check_layering.py                  # the repository holding this script
  scripts/check_layering.py --root /path/to/checkout --verbose
  scripts/check_layering.py --self-test      # the check on a small tree with known violations
"""

import argparse
import os
import re
import sys
import tempfile

# (layer, its folder, the layers directly below it). Lowest first. A layer may include itself and
# everything reachable through the third column.
CORE_TOP = ["core/hardware", "core/api"]
LAYERS = [
    ("core/base", "core/base", []),
    ("core/layout", "core/layout", ["core/base"]),
    ("core/model", "core/model", ["core/layout"]),
    ("core/mesh", "core/mesh", ["core/model"]),
    ("core/policy", "core/policy", ["core/mesh"]),
    ("core/schedule", "core/schedule", ["core/policy"]),
    ("core/hardware", "core/hardware", ["core/schedule"]),
    ("core/api", "core/api", ["core/schedule"]),
    # Above core: the simulator and the backends, neither including the other.
    ("sim", "sim", CORE_TOP),
    ("backends/model", "backends/model", CORE_TOP),
    ("backends/store", "backends/store", CORE_TOP),
    ("backends/exec", "backends/exec", ["backends/model"]),
    ("backends/cpu", "backends/cpu", ["backends/exec"]),
    ("backends/cuda", "backends/cuda", ["backends/cpu", "backends/store"]),
    # Above sim: the renderers and the sweep.
    ("viz", "viz", ["sim"]),
    ("sweep", "sweep", ["sim"]),
    # Above viz and sweep: what every front end shares (option assembly, the step report).
    ("planner", "planner", ["viz", "sweep"]),
    ("cli", "cli", ["planner", "backends/cuda"]),
    # The Python extension (fsdpsim._core): the planner's calls, as the CLI makes them.
    ("python", "python", ["planner"]),
    # Test code sits on top of everything (and properties/ reuses helpers of tests/).
    ("tests", "tests", ["cli"]),
    ("properties", "properties", ["cli", "tests"]),
    ("fuzz", "fuzz", ["cli"]),
]
TEST_LAYERS = {"tests", "properties", "fuzz"}

# System headers allowed in some folders only: (regex on the name inside <> or "", the layer they
# are reported as, folders that may include them).
CUDA_HEADER = re.compile(
    r"^(cuda|cublas|cufft|curand|cusparse|cusolver|cudnn|cutensor|nccl|nvtx|nvToolsExt|nvrtc|"
    r"nvml|cooperative_groups|thrust/|cub/|nv/)")
SYSTEM_RULES = [
    (CUDA_HEADER, "backends/cuda", ["backends/cuda", "tests/backends/cuda"]),
]

SOURCE_SUFFIXES = (".cc", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
CORE_CMAKE = "core/CMakeLists.txt"
CORE_LAYER_CALL = re.compile(r"fsdp_core_layer\(\s*(\w+)([^)]*)\)", re.S)
CORE_LINK = re.compile(r"fsdp::core_(\w+)")


def closure(layers):
    """{layer: set of layers it may include, itself included}."""
    below = {name: set(deps) for name, _, deps in layers}
    for name, _, deps in layers:
        for dep in deps:
            if dep not in below:
                raise SystemExit(f"check_layering.py: layer {name} sits on unknown layer {dep}")
    allowed = {}

    def visit(name, stack=()):
        if name in stack:
            raise SystemExit(f"check_layering.py: layer cycle {' -> '.join(stack + (name,))}")
        if name not in allowed:
            reach = {name}
            for dep in below[name]:
                reach |= visit(dep, stack + (name,))
            allowed[name] = reach
        return allowed[name]

    for name in below:
        visit(name)
    return allowed


def layer_of(path, layers):
    """The layer whose folder is the longest prefix of `path` (a repo-relative / path), or None."""
    best = None
    for name, folder, _ in layers:
        if path.startswith(folder + "/") and (best is None or len(folder) > len(best[1])):
            best = (name, folder)
    return best[0] if best else None


def internal_owner(path):
    """For a path inside an internal/ folder, the folder holding that internal/ folder."""
    parts = path.split("/")
    if "internal" in parts[:-1]:
        return "/".join(parts[: parts.index("internal")])
    return None


def source_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(
            d for d in dirnames
            if not d.startswith(".") and not (rel_dir == "." and d == "build"))
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                rel = os.path.normpath(os.path.join(rel_dir, name)).replace(os.sep, "/")
                yield rel


def includes_of(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield lineno, m.group(1), m.group(2).strip()


def check_tree(root, layers=LAYERS):
    """Returns (violations, {core layer: {core layer it includes: first file:line}})."""
    allowed = closure(layers)
    violations = []
    core_uses = {}
    for rel in source_files(root):
        layer = layer_of(rel, layers)
        if layer is None:
            violations.append(f"{rel}: not in any layer (add its folder to LAYERS in "
                              f"scripts/check_layering.py and, under core/, a target to "
                              f"{CORE_CMAKE})")
            continue
        if rel.endswith((".cu", ".cuh")) and not any(
                rel.startswith(p + "/") for p in SYSTEM_RULES[0][2]):
            violations.append(f"{rel}: CUDA source outside backends/cuda")
        for lineno, quote, target in includes_of(root, rel):
            where = f"{rel}:{lineno}"
            system = next((r for r in SYSTEM_RULES if r[0].match(target)), None)
            if system is not None:
                if not any(rel.startswith(p + "/") for p in system[2]):
                    violations.append(f"{where}: includes <{target}> (layer {system[1]}) "
                                      f"from layer {layer}")
                continue
            if quote == "<":
                continue  # a system or third-party header
            if not os.path.isfile(os.path.join(root, target)):
                # The repository's includes are root-relative; also try the including folder.
                local = os.path.normpath(os.path.join(os.path.dirname(rel), target))
                if local.startswith("..") or not os.path.isfile(os.path.join(root, local)):
                    continue  # a third-party header
                target = local.replace(os.sep, "/")
            target_layer = layer_of(target, layers)
            if target_layer is None:
                violations.append(f"{where}: includes {target} (no layer) from layer {layer}")
                continue
            if target_layer not in allowed[layer]:
                violations.append(f"{where}: includes {target} (layer {target_layer}) "
                                  f"from layer {layer}")
                continue
            owner = internal_owner(target)
            if (owner is not None and layer not in TEST_LAYERS
                    and not rel.startswith(owner + "/")):
                violations.append(f"{where}: includes {target} (layer {target_layer}, internal "
                                  f"to {owner}/) from layer {layer}")
                continue
            if layer.startswith("core/") and target_layer != layer:
                core_uses.setdefault(layer, {}).setdefault(target_layer, where)
    return violations, core_uses


def check_core_cmake(root, core_uses, layers=LAYERS):
    """Each fsdp_core_layer(NAME ...) links exactly the core layers core/NAME includes."""
    allowed = closure(layers)
    path = os.path.join(root, CORE_CMAKE)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # Drop comments so that a commented-out call or link does not count.
    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    violations = []
    declared = {}
    for m in CORE_LAYER_CALL.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        links = {"core/" + d for d in CORE_LINK.findall(m.group(2))}
        declared["core/" + m.group(1)] = (line, links)
    present = {name for name, folder, _ in layers
               if name.startswith("core/") and os.path.isdir(os.path.join(root, folder))}
    for layer in sorted(set(core_uses) | set(declared) | present):
        if layer not in declared:
            violations.append(f"{CORE_CMAKE}: no fsdp_core_layer({layer[5:]}) for the files of "
                              f"{layer}/")
            continue
        line, links = declared[layer]
        uses = core_uses.get(layer, {})
        for dep in sorted(set(uses) - links):
            violations.append(f"{CORE_CMAKE}:{line}: fsdp::core_{layer[5:]} does not link "
                              f"fsdp::core_{dep[5:]} but {uses[dep]} includes {dep}")
        for dep in sorted(links - set(uses)):
            if dep not in allowed.get(layer, set()):
                violations.append(f"{CORE_CMAKE}:{line}: fsdp::core_{layer[5:]} links "
                                  f"fsdp::core_{dep[5:]}, which is not below it")
            else:
                violations.append(f"{CORE_CMAKE}:{line}: fsdp::core_{layer[5:]} links "
                                  f"fsdp::core_{dep[5:]} but no file of {layer}/ includes {dep}")
    return violations


def run(root, verbose=False, out=sys.stdout):
    violations, core_uses = check_tree(root)
    violations += check_core_cmake(root, core_uses)
    for v in violations:
        print(v, file=out)
    if verbose or violations:
        count = sum(1 for _ in source_files(root))
        print(f"check_layering: {count} files, {len(violations)} violation(s)", file=out)
    return 1 if violations else 0


def self_test():
    """The check on a small tree: clean first, then one violation of each kind."""
    files = {
        "core/base/a.h": "",
        "core/layout/b.h": '#include "core/base/a.h"\n',
        "core/layout/internal/c.h": "",
        "core/layout/b.cc": '#include "core/layout/internal/c.h"\n#include <vector>\n',
        "core/model/d.h": '#include "core/layout/b.h"\n#include "third_party/x.h"\n',
        "sim/e.cc": '#include "core/model/d.h"\n',
        "backends/cuda/f.cu": "#include <cuda_runtime.h>\n#include <nccl.h>\n",
        "tests/core/g.cc": '#include "core/layout/internal/c.h"\n#include "sim/e.cc"\n',
        "build/stale.cc": '#include "cli/anything.h"\n',
        CORE_CMAKE: "fsdp_core_layer(base)\nfsdp_core_layer(layout PUBLIC_DEPS fsdp::core_base)\n"
                    "fsdp_core_layer(model PUBLIC_DEPS fsdp::core_layout)\n",
    }
    bad = {
        "core/base/a.h": '#include "core/model/d.h"\n',             # upward
        "sim/e.cc": '#include "core/layout/internal/c.h"\n',        # another folder's internal/
        "backends/cpu/h.cc": "#include <nccl.h>\n",                 # NCCL outside backends/cuda
        "backends/model/i.h": '#include "sim/e.cc"\n',              # a peer
        "core/model/d.h": '#include "core/base/a.h"\n',             # model stops using layout
        "core/layout/k.h": '#include "../model/d.h"\n',             # upward, relative
        "newdir/j.cc": "",                                          # in no layer
    }
    expected = [
        "core/base/a.h:1: includes core/model/d.h (layer core/model) from layer core/base",
        "sim/e.cc:1: includes core/layout/internal/c.h (layer core/layout, internal to "
        "core/layout/) from layer sim",
        "core/layout/k.h:1: includes core/model/d.h (layer core/model) from layer core/layout",
        "backends/cpu/h.cc:1: includes <nccl.h> (layer backends/cuda) from layer backends/cpu",
        "backends/model/i.h:1: includes sim/e.cc (layer sim) from layer backends/model",
        "newdir/j.cc: not in any layer",
        f"{CORE_CMAKE}:3: fsdp::core_model links fsdp::core_layout but no file of core/model/ "
        "includes core/layout",
        f"{CORE_CMAKE}:3: fsdp::core_model does not link fsdp::core_base but core/model/d.h:1 "
        "includes core/base",
    ]

    def write(root, tree):
        for rel, text in tree.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)

    class Lines:
        def __init__(self):
            self.lines = []

        def write(self, s):
            self.lines += [x for x in s.splitlines() if x]

    with tempfile.TemporaryDirectory() as root:
        write(root, files)
        clean = Lines()
        if run(root, out=clean) != 0:
            print("self-test: the clean tree fails:\n  " + "\n  ".join(clean.lines))
            return 1
        write(root, bad)
        got = Lines()
        status = run(root, out=got)
        missing = [e for e in expected if not any(line.startswith(e) for line in got.lines)]
        # Every expected line plus the summary; nothing else.
        if status != 1 or missing or len(got.lines) != len(expected) + 1:
            print("self-test: expected\n  " + "\n  ".join(expected) + "\ngot\n  " +
                  "\n  ".join(got.lines))
            return 1
    print(f"check_layering self-test: {len(expected)} violations found as expected")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(here),
                        help="repository root (default: the one holding this script)")
    parser.add_argument("--verbose", action="store_true", help="print a summary when clean too")
    parser.add_argument("--self-test", action="store_true",
                        help="run the check on a generated tree with known violations")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    return run(args.root, verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
