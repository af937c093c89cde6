# SPDX-License-Identifier: Apache-2.0
"""fsdpsim from Python: the simulator and planner of the fsdpsim CLI, called in-process.

Every keyword is the CLI option of the same name in snake_case (``seq_len`` is ``--seq-len``),
with the CLI's default and validation; errors are the CLI's one-line messages, raised as
ValueError. ``simulate(...).to_dict()`` is exactly ``fsdpsim simulate --format json``
(docs/user-guide.md, "From Python").
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from . import _core, layout

__all__ = ["simulate", "plan", "Result", "PlanResult", "layout"]


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


class Result:
    """One simulated optimizer step (the C++ planner::SimulatedStep)."""

    def __init__(self, step: "_core.Step") -> None:
        self._step = step
        self._dict: Optional[Dict[str, Any]] = None

    # The headline figures, read from the C++ step.
    @property
    def step_time_s(self) -> float:
        return self._step.step_time_s

    @property
    def tokens_per_second_per_gpu(self) -> float:
        return self._step.tokens_per_second_per_gpu

    @property
    def tflops_per_gpu(self) -> float:
        return self._step.tflops_per_gpu

    @property
    def mfu(self) -> float:
        return self._step.mfu

    @property
    def fits(self) -> bool:
        return self._step.fits

    @property
    def headroom_bytes(self) -> int:
        return self._step.headroom_bytes

    @property
    def peak_allocated_bytes(self) -> int:
        return self._step.peak_allocated_bytes

    @property
    def peak_reserved_bytes(self) -> int:
        return self._step.peak_reserved_bytes

    @property
    def memory_by_class(self) -> Dict[str, int]:
        """Rank 0's class: bytes per buffer class at its allocated peak."""
        return dict(self.to_dict()["classes"][0]["memory"]["peak_composition_bytes"])

    @property
    def communication(self) -> List[Dict[str, Any]]:
        """Rank 0's class: per stream and mesh axis, count, busy and exposed picoseconds."""
        return [dict(c) for c in self.to_dict()["classes"][0]["communication"]]

    def to_dict(self) -> Dict[str, Any]:
        """Exactly `fsdpsim simulate --format json` (parsed from the same JSON text)."""
        if self._dict is None:
            self._dict = json.loads(self._step.json_text())
        return json.loads(json.dumps(self._dict))  # a copy the caller may change

    def text(self) -> str:
        """`fsdpsim simulate`'s text report."""
        return self._step.text()

    def save_trace(self, path: "os.PathLike[str] | str") -> None:
        """A Chrome trace of the step (open it in ui.perfetto.dev), as `--trace FILE`."""
        self._step.save_trace(os.fspath(path))

    def save_memory_plot(self, path: "os.PathLike[str] | str") -> None:
        """An SVG plot of memory over the step, as `--plot FILE.svg`."""
        self._step.save_memory_plot(os.fspath(path))

    def __repr__(self) -> str:
        # Three significant digits, as the CLI's text: the model promises a few percent
        # (docs/validation.md).
        verdict = "fits" if self.fits else "does not fit"
        return (f"<fsdpsim.Result {_sig3(self.tokens_per_second_per_gpu)} tokens/s/GPU, "
                f"MFU {self.mfu * 100:.1f}%, {verdict}, headroom {_gib(self.headroom_bytes)}, "
                f"step {_sig3(self.step_time_s * 1e3)} ms>")


def _sig3(value: float) -> str:
    """value to three significant digits, never in exponent form: 8652.4 -> '8,650'."""
    rounded = float(f"{value:.3g}")
    return f"{rounded:,.0f}" if abs(rounded) >= 100 else f"{rounded:g}"


def simulate(model: str = "llama-3-8b", mesh: str = "dp=16", *, hardware: str = "h100",
             **options: Any) -> Result:
    """Simulates one optimizer step, as `fsdpsim simulate` with the same options.

    Keywords are the CLI's options in snake_case (seq_len, micro_batch_size, microbatches
    (default 4), strategy, recompute, framework, compile, compute_dtype, fp8_all_gather, ...).
    An unknown keyword or a bad value raises ValueError with the CLI's message.
    """
    options.update(model=model, mesh=mesh, hardware=hardware)
    return Result(_core.simulate(options))


class PlanResult:
    """`fsdpsim plan`'s result: the ranked configurations and why the winner wins."""

    def __init__(self, report: Dict[str, Any]) -> None:
        self.report = report
        self.configurations: List[Dict[str, Any]] = report["configurations"]
        self.rows: List[Dict[str, Any]] = [self.configurations[i] for i in report["ranking"]]
        self.explanation: List[str] = list(report.get("explanation", []))

    def best(self) -> Optional[Dict[str, Any]]:
        """The fastest configuration that fits (None when none does)."""
        return self.rows[0] if self.rows else None

    def to_pandas(self) -> Any:
        """The ranked rows as a pandas DataFrame."""
        try:
            import pandas  # noqa: PLC0415 (pandas is optional)
        except ImportError as e:
            raise ImportError("PlanResult.to_pandas() needs pandas, which is not installed: "
                              "pip install pandas (or use .rows, a list of dicts)") from e
        return pandas.DataFrame(self.rows)

    def __repr__(self) -> str:
        best = self.best()
        head = "no configuration fits" if best is None else (
            f"best #{best['index']} {best['strategy']} {best['mesh']}: "
            f"{best['tokens_per_second_per_gpu']:,.0f} tokens/s/GPU")
        return f"<fsdpsim.PlanResult {len(self.rows)} ranked; {head}>"


def plan(model: str, *, gpus: int, seq_len: int, global_batch_tokens: int,
         hardware: str = "h100", jobs: Optional[int] = None, **options: Any) -> PlanResult:
    """Searches configurations of `model` on `gpus` GPUs, as `fsdpsim plan --format json`.

    List options (strategies, tp, ep, recompute, reshard_after_forward, prefetch) take Python
    lists. jobs defaults to os.cpu_count(); the GIL is released while planning.
    """
    options.update(model=model, gpus=gpus, seq_len=seq_len,
                   global_batch_tokens=global_batch_tokens, hardware=hardware,
                   jobs=jobs if jobs is not None else (os.cpu_count() or 1))
    return PlanResult(json.loads(_core.plan(options)))
