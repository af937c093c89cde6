#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plan a job from Python, then look closer at the winner (docs/user-guide.md, "From Python").

Run it with the virtual environment scripts/setup.sh makes:
    build/venv/bin/python examples/plan_from_python.py
"""
import fsdpsim

# The fastest configurations of Llama 3 8B on 64 H100s for a 4M-token global batch; the
# keywords are `fsdpsim plan`'s options (lists where the CLI takes comma-separated lists).
plan = fsdpsim.plan("llama-3-8b", gpus=64, seq_len=8192, global_batch_tokens=4 * 1024 * 1024,
                    recompute=["none", "selective-op", "full"], prefetch=[1])
print(plan)
for row in plan.rows[:5]:
    print(f"#{row['index']:<5} {row['strategy']:<8} {row['mesh']:<22} "
          f"micro-batch {row['micro_batch_size']} x {row['microbatches']:<3} "
          f"recompute {row['recompute']:<13} {row['tokens_per_second_per_gpu']:8.0f} tokens/s/GPU")
print("\n".join(plan.explanation))

# Simulate the winner again with the same options `fsdpsim simulate` would take, and write
# its memory plot and trace (open the trace in ui.perfetto.dev).
best = plan.best()
result = fsdpsim.simulate("llama-3-8b", best["mesh"], strategy=best["strategy"],
                          seq_len=8192, micro_batch_size=best["micro_batch_size"],
                          microbatches=best["microbatches"], recompute=best["recompute"],
                          reshard_after_forward=best["reshard_after_forward"],
                          prefetch=best["prefetch"], sequence_parallel=best["sequence_parallel"])
print(result)
print({name: f"{size / 2**30:.1f} GiB" for name, size in result.memory_by_class.items()})
result.save_memory_plot("best-memory.svg")
result.save_trace("best-trace.json")
print("wrote best-memory.svg and best-trace.json")
