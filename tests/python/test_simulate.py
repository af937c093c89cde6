# SPDX-License-Identifier: Apache-2.0
# fsdpsim.simulate against `fsdpsim simulate --format json`: the same options give the same
# report, and the same bad options the same message (docs/user-guide.md, "From Python").
import json
import re
import math

import pytest

import fsdpsim
from conftest import run_cli

# Small enough to run quickly under the sanitizer build of the CLI, varied enough to reach each
# strategy, a tp and an ep mesh, every recompute mode, fp8 and each framework.
SMALL = dict(layers=4, seq_len=1024)
CONFIGS = [
    dict(),  # the CLI's default: llama-3-8b, zero3, dp=16, 4 microbatches
    dict(strategy="zero3", mesh="dp=8", recompute="full", **SMALL),
    dict(strategy="hsdp", mesh="dp_outer=2,dp_inner=8", recompute="selective-op", **SMALL),
    dict(strategy="zero2", mesh="dp=8", microbatches=2, recompute="selective-layer:2", **SMALL),
    dict(strategy="noshard", mesh="dp=4", model="llama-3.2-1b", recompute="core-attention",
         seq_len=2048),
    dict(mesh="dp=4,tp=4", sequence_parallel=True, **SMALL),
    dict(model="mixtral-8x7b", mesh="dp=8,ep=8", layers=2, capacity_factor=1.25, seq_len=1024),
    dict(compute_dtype="fp8", fp8_all_gather=True, mesh="dp=8", **SMALL),
    dict(framework="fsdp2", compile=True, reshard_after_forward="all-but-last",
         reduce_dtype="fp32", mesh="dp=8", **SMALL),
    dict(framework="fsdp1", mesh="dp=8", prefetch="next(2)", hardware="a100", **SMALL),
    dict(compute_model="flops", matmul_efficiency=0.5, mesh="dp=8", **SMALL),
    dict(straggler="rank=3,compute=1.2", mesh="dp=8", micro_batch_size=2, **SMALL),
]


def _id(config):
    return ",".join(f"{k}={v}" for k, v in config.items()) or "default"


@pytest.mark.parametrize("config", CONFIGS, ids=[_id(c) for c in CONFIGS])
def test_to_dict_is_the_cli_json(fsdpsim_exe, config):
    expected = run_cli(fsdpsim_exe, "simulate", dict(config, format="json"))
    result = fsdpsim.simulate(**config)
    assert result.to_dict() == expected
    # The properties are the report's figures.
    assert result.step_time_s == expected["step_time_s"]
    assert result.tokens_per_second_per_gpu == expected["tokens_per_second_per_gpu"]
    assert result.mfu == expected["mfu"]
    assert result.fits == expected["fits"]
    assert result.headroom_bytes == expected["headroom_bytes"]
    assert result.peak_reserved_bytes == expected["memory"]["peak_reserved_bytes"]
    assert result.peak_allocated_bytes == expected["memory"]["peak_allocated_bytes"]


def test_result_parts_and_repr():
    result = fsdpsim.simulate(layers=2, mesh="dp=8", seq_len=1024)
    d = result.to_dict()
    assert result.memory_by_class == d["classes"][0]["memory"]["peak_composition_bytes"]
    assert {c["stream"] for c in result.communication} == {"all-gather", "reduce-scatter"}
    text = repr(result)
    assert "tokens/s/GPU" in text and "MFU" in text and "headroom" in text
    # Figures to three significant digits, as the CLI's text: within 0.5% of the exact ones.
    tps = float(re.search(r"Result ([0-9,.]+) tokens/s/GPU", text).group(1).replace(",", ""))
    step_ms = float(re.search(r"step ([0-9,.]+) ms", text).group(1).replace(",", ""))
    assert abs(tps / result.tokens_per_second_per_gpu - 1) < 0.005
    assert abs(step_ms / (result.step_time_s * 1e3) - 1) < 0.005
    assert "fits" in text
    # text() is the CLI's text report: the run line, then the figures people compare.
    lines = result.text().splitlines()
    assert lines[0].startswith("model llama-3-8b, strategy zero3")
    assert lines[1].startswith("throughput: ") and lines[2].startswith("memory: ")
    # to_dict hands out a copy.
    d["mesh"] = "changed"
    assert result.to_dict()["mesh"] == "dp=8"


def test_trace_and_memory_plot_match_the_cli(fsdpsim_exe, tmp_path):
    options = dict(layers=2, mesh="dp=4", seq_len=1024)
    cli_trace = tmp_path / "cli.json"
    run_cli(fsdpsim_exe, "simulate",
            dict(options, format="json", trace=str(cli_trace), plot=str(tmp_path / "cli.svg")))
    result = fsdpsim.simulate(**options)
    result.save_trace(tmp_path / "py.json")
    result.save_memory_plot(tmp_path / "py.svg")
    assert json.loads((tmp_path / "py.json").read_text()) == json.loads(cli_trace.read_text())
    assert (tmp_path / "py.svg").read_text() == (tmp_path / "cli.svg").read_text()


def _cli_error(exe, options):
    proc = run_cli(exe, "simulate", options, check=False)
    assert proc.returncode != 0
    return proc.stderr.strip()


@pytest.mark.parametrize("options", [
    dict(strategy="zero9"),
    dict(mesh="dp=0"),
    dict(recompute="sometimes"),
    dict(fp8_all_gather=True),  # needs compute_dtype="fp8"
    dict(framework="deepspeed"),
    dict(hardware="h900"),
    dict(straggler="rank=99,compute=2"),
    dict(mesh="dp=8", sequence_parallel=True),
], ids=lambda o: _id(o))
def test_bad_value_is_the_cli_message(fsdpsim_exe, options):
    stderr = _cli_error(fsdpsim_exe, options)
    prefix = "fsdpsim: error: "
    assert stderr.startswith(prefix), stderr
    with pytest.raises(ValueError) as raised:
        fsdpsim.simulate(**options)
    assert str(raised.value) == stderr[len(prefix):]


def test_unknown_keyword_names_it(fsdpsim_exe):
    stderr = _cli_error(fsdpsim_exe, {"no_such_option": "1"})
    assert "unrecognised option '--no-such-option'" in stderr
    with pytest.raises(ValueError, match="'no_such_option'") as raised:
        fsdpsim.simulate(no_such_option=1)
    assert "unrecognised option '--no-such-option'" in str(raised.value)


@pytest.mark.parametrize("options,expected", [
    (dict(seq_len="4096"), "for option '--seq-len' is invalid"),
    (dict(seq_len=True), "for option '--seq-len' is invalid"),
    (dict(compile="yes"), "for option '--compile' is invalid"),
    (dict(strategy=""), "--strategy has an empty value"),
    (dict(prefetch="next(2)", forward_prefetch="none"),
     "--prefetch sets both directions and conflicts with --forward-prefetch"),
])
def test_bad_type_or_conflict(options, expected):
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        fsdpsim.simulate(**options)


def test_binding_overhead(capsys):
    """200 calls of a tiny simulate: Python's wall time per call against the C++ time inside.

    Reports the overhead; asserts nothing about speed (the machine's load decides that)."""
    import time

    options = dict(layers=1, hidden=256, ffn=512, heads=4, kv_heads=4, vocab=512, seq_len=128,
                   mesh="dp=2", microbatches=1)
    fsdpsim.simulate(**options)  # warm: the model presets and hardware load once
    inside = 0.0
    start = time.perf_counter()
    for _ in range(200):
        inside += fsdpsim.simulate(**options)._step.simulate_seconds
    wall = time.perf_counter() - start
    per_call = wall / 200
    overhead = (wall - inside) / 200
    assert math.isfinite(overhead) and per_call > 0 and inside > 0
    with capsys.disabled():
        print(f"\nbinding overhead: {per_call * 1e6:.0f} us per simulate call, "
              f"{inside / 200 * 1e6:.0f} us inside C++, {overhead * 1e6:.1f} us overhead")
