#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The anchor a user would compare `fsdpsim train --backend cuda` with: the same decoder
(docs/design/backends.md, "Shapes and units": embedding, L blocks x + W2 gelu(W1 rmsnorm(x)), a
head rmsnorm + linear + cross-entropy) trained in plain PyTorch, fp32 (no TF32), one GPU, plain
Adam, timed the same way (median step of the timed steps after warm-up). Prints one JSON line:
step_ms, tokens_per_s, the IR-counted FLOPs per step (6 * tokens * (2*L*H*F + H*V), the figure
fsdpsim reports) and the achieved TFLOP/s, peak allocated and reserved bytes.

  usage: gpu_torch_anchor.py --layers L --hidden H --ffn F --vocab V --seq-len S
                             --micro-batch-size B [--microbatches M] [--steps N] [--warmup W]
"""
import argparse
import json
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in (("layers", 2), ("hidden", 32), ("ffn", 64), ("vocab", 64),
                          ("seq-len", 16), ("micro-batch-size", 2), ("microbatches", 1),
                          ("steps", 10), ("warmup", 3)):
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"error": f"no torch: {e}"}))
        return 1
    if not torch.cuda.is_available():
        print(json.dumps({"error": "torch sees no CUDA device"}))
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False  # fsdpsim's cuBLAS calls are pedantic fp32
    torch.manual_seed(1)
    dev = torch.device("cuda")
    H, F, V, L = a.hidden, a.ffn, a.vocab, a.layers

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.RMSNorm(H, eps=1e-5)
            self.w1 = torch.nn.Linear(H, F, bias=False)
            self.w2 = torch.nn.Linear(F, H, bias=False)

        def forward(self, x):
            return x + self.w2(torch.nn.functional.gelu(self.w1(self.norm(x)), approximate="tanh"))

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(V, H)
            self.layers = torch.nn.ModuleList(Block() for _ in range(L))
            self.norm = torch.nn.RMSNorm(H, eps=1e-5)
            self.out = torch.nn.Linear(H, V, bias=False)

        def forward(self, tokens):
            x = self.embedding(tokens)
            for layer in self.layers:
                x = layer(x)
            return self.out(self.norm(x))

    model = Decoder().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    tokens = torch.randint(0, V, (a.microbatches, a.micro_batch_size, a.seq_len), device=dev)
    targets = torch.randint(0, V, tokens.shape, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        for m in range(a.microbatches):
            logits = model(tokens[m])
            loss = torch.nn.functional.cross_entropy(logits.view(-1, V), targets[m].view(-1))
            (loss / a.microbatches).backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    toks = a.microbatches * a.micro_batch_size * a.seq_len
    flops = 6 * toks * (2 * L * H * F + H * V)
    print(json.dumps({
        "framework": f"torch {torch.__version__}",
        "device": torch.cuda.get_device_name(0),
        "step_ms": step_s * 1e3,
        "tokens_per_s": toks / step_s,
        "flops_per_step": flops,
        "achieved_tflops": flops / step_s / 1e12,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
