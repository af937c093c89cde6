# SPDX-License-Identifier: Apache-2.0
# fsdpsim.plan against `fsdpsim plan --format json` on a shrunk model: the same report, so the
# same ranking and explanation.
import pytest

import fsdpsim
from conftest import run_cli

SHRUNK = dict(layers=2, hidden=512, ffn=1024, heads=8, kv_heads=8, vocab=1000)


def test_plan_is_the_cli_plan(fsdpsim_exe):
    options = dict(SHRUNK, gpus=8, seq_len=512, global_batch_tokens=32768,
                   recompute=["none", "full"], prefetch=[1])
    expected = run_cli(fsdpsim_exe, "plan", dict(options, model="llama-3-8b", format="json"))
    result = fsdpsim.plan("llama-3-8b", **options)
    assert result.report == expected
    assert [r["index"] for r in result.rows] == expected["ranking"]
    assert result.best() == expected["configurations"][expected["ranking"][0]]
    assert result.explanation == expected["explanation"]
    assert len(result.rows) >= 2


def test_plan_jobs_do_not_change_the_result():
    options = dict(SHRUNK, gpus=8, seq_len=512, global_batch_tokens=16384, prefetch=[1])
    one = fsdpsim.plan("llama-3-8b", jobs=1, **options)
    many = fsdpsim.plan("llama-3-8b", **options)
    assert one.report == many.report


def test_plan_errors(fsdpsim_exe):
    options = dict(SHRUNK, gpus=8, seq_len=512, global_batch_tokens=1000)
    proc = run_cli(fsdpsim_exe, "plan", dict(options, model="llama-3-8b"), check=False)
    assert proc.returncode != 0
    message = proc.stderr.strip().removeprefix("fsdpsim: error: ")
    with pytest.raises(ValueError) as raised:
        fsdpsim.plan("llama-3-8b", **options)
    assert str(raised.value) == message
    with pytest.raises(ValueError, match="unrecognised option '--mesh'"):
        fsdpsim.plan("llama-3-8b", mesh="dp=8", **dict(options, global_batch_tokens=4096))
    with pytest.raises(ValueError, match="--reshard-after-forward item 'some'"):
        fsdpsim.plan("llama-3-8b", reshard_after_forward=["some"],
                     **dict(options, global_batch_tokens=4096))


def test_to_pandas_or_a_clear_import_error():
    result = fsdpsim.plan("llama-3-8b", **SHRUNK, gpus=8, seq_len=512, global_batch_tokens=16384,
                          prefetch=[1], recompute=["none"])
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs pandas"):
            result.to_pandas()
    else:
        frame = result.to_pandas()
        assert list(frame["index"]) == [r["index"] for r in result.rows]
