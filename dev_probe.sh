#!/usr/bin/env bash
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo install failed; exit 8; }
export PYTHONUNBUFFERED=1
cd fixtures/real_gpu
( TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout 300 tcompile bisect --accuracy --json --out /tmp/b3 c3_176565_fp32_bf16_fp32_roundtrip.py > $OUT/b3.json 2> $OUT/b3.err; echo "b3 rc=$?" ) &
( TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout 300 tcompile run --accuracy --json --out /tmp/r2 c2_178080_invalid_gradient_shape.py > $OUT/r2.json 2> $OUT/r2.err; echo "r2 rc=$?" ) &
( TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout 300 python3 - > $OUT/c2diag.txt 2>&1 <<'PY'
import torch, torch.nn as nn
from torch._dynamo.testing import CompileCounterWithBackend
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 253, 1, bias=False)
        self.conv2 = nn.Conv2d(253, 1, 1, bias=False)
        self.w = nn.Parameter(torch.ones(1, 253, 1, 1))
    def forward(self, x):
        h = self.conv1(x)
        h = h / torch.sum(h, dim=1, keepdim=True) * self.w
        return self.conv2(h)
from torch._functorch.aot_autograd import aot_module_simplified
from torch._inductor.compile_fx import compile_fx
x = torch.randn(64, 4, 18, 18, device="cuda")
m = torch.compile(Model().cuda())
try:
    m(x).sum().backward()
except Exception as e:
    print("ERR", e)
import torch._inductor.config as c
PY
echo c2diag done ) &
wait
cd /tmp && tar czf $OUT/dev.tgz --exclude='compile-cache' --exclude='*.so' b3 r2 2>/dev/null; ls -la $OUT
