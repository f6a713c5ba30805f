"""The hand-written checker torch's compiler_bisector needs (exit 0: good, 1: bad).

It runs the planted-bug computation of fixtures/cpp_relu_accuracy.py compiled and
eagerly and compares them; each invocation appends a line to $CHECKER_LOG so the
benchmark can count torch's runs."""

import os
import sys

import torch
import torch._inductor.config

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


def f(x, w):
    h = torch.matmul(x, w)
    h = h * 2 + 1
    h = torch.relu(h)
    return torch.tanh(h).sum(dim=0)


if os.environ.get("CHECKER_LOG"):
    with open(os.environ["CHECKER_LOG"], "a") as log:
        log.write("run\n")
torch.manual_seed(0)
x, w = torch.randn(16, 8), torch.randn(8, 8)
ok = torch.allclose(torch.compile(f)(x, w), f(x, w), rtol=1e-4, atol=1e-4)
sys.exit(0 if ok else 1)
