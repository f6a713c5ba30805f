"""Functions and classes a repro must carry with what they reach (tests/unit/test_carry.py)."""

import math

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

aten = torch.ops.aten
SCALE = math.sqrt(4.0)
LIMITS = {"low": -math.inf, "high": math.inf}


def is_mul(node):
    return node.op == "call_function" and node.target == aten.mul.Tensor


class MulToSub(CustomGraphPass):
    def __call__(self, graph):
        for node in graph.nodes:
            if is_mul(node) and SCALE > 1 and LIMITS["high"] > 0:
                node.target = aten.sub.Tensor

    def uuid(self):
        return get_hash_for_files((__file__,))


TABLE = {"gelu": lambda x, approximate="none": torch.tanh(x) * SCALE}


def make_pass(offset):
    def shifted(x):
        return x + offset

    return shifted
