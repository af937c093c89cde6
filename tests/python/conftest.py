# SPDX-License-Identifier: Apache-2.0
# The fsdpsim CLI the Python package is compared with: FSDPSIM_EXE (scripts/test.sh sets it to
# build/<preset>/bin/fsdpsim). Missing, every test that needs it fails: a comparison that did not
# run is not coverage.
import json
import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def fsdpsim_exe():
    exe = os.environ.get("FSDPSIM_EXE")
    if not exe or not os.access(exe, os.X_OK):
        pytest.fail(f"FSDPSIM_EXE is {exe!r}: set it to a built fsdpsim binary "
                    "(scripts/test.sh sets build/<preset>/bin/fsdpsim)")
    return exe


def cli_args(options):
    """Python keywords as the CLI's command line: seq_len=512 -> --seq-len 512; True -> a flag."""
    args = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            args += [flag, ",".join(str(v) for v in value)]
        else:
            args += [flag, str(value)]
    return args


def run_cli(exe, command, options, check=True):
    proc = subprocess.run([exe, command, *cli_args(options)], capture_output=True, text=True,
                          check=False)
    if check:
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)
    return proc
