#!/usr/bin/env python3
"""Conv-5 (miniImageNet 84x84x3, 5 blocks of 64 ch 3x3 conv, ReLU, dropout, 2x2 floor max-pool; the
folder-5w1s / mini-5w1s presets' backbone) forward+backward+Adam step time in PyTorch on CPU.
A peer for mkbench's BenchmarkConv5Step: python3 torch_conv5.py --batch 80 --threads 2"""
import argparse, json, time, torch, torch.nn as nn
p = argparse.ArgumentParser(); p.add_argument("--batch", type=int, default=80); p.add_argument("--threads", type=int, default=2)
p.add_argument("--steps", type=int, default=10); p.add_argument("--keep", type=float, default=0.5); a = p.parse_args()
torch.set_num_threads(a.threads); torch.manual_seed(0)
def block(cin):
    return [nn.Conv2d(cin, 64, 3, padding=1), nn.ReLU()] + ([nn.Dropout(1 - a.keep)] if a.keep < 1 else []) + [nn.MaxPool2d(2)]
net = nn.Sequential(*block(3), *block(64), *block(64), *block(64), *block(64), nn.Flatten()).train()
opt = torch.optim.Adam(net.parameters(), 1e-3)
x = torch.rand(a.batch, 3, 84, 84); r = torch.randn(a.batch, 256)
ts = []
for i in range(a.steps + 3):
    t = time.perf_counter(); y = net(x); loss = (y * r).sum(); opt.zero_grad(); loss.backward(); opt.step(); ts.append(time.perf_counter() - t)
ts = sorted(ts[3:]); print(json.dumps(dict(out_dim=y.shape[1], batch=a.batch, threads=a.threads, keep=a.keep, median_ms=1000 * ts[len(ts) // 2], min_ms=1000 * ts[0])))
