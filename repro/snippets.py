"""The pieces a short repro.py is assembled from; each goes in only when the failure
needs it (an accuracy check for an accuracy failure, gradients when a gradient
differs, a child process when the bug kills the process, ...).

They restate, in a few lines each, how tcompile names a failure (compiler/signature.py);
how it judges numbers is not restated but generated from the rule itself
(compiler/accuracy_rule.py).  tests/e2e/test_repro_short.py checks that they agree with
tcompile on a battery of exceptions and tensors.  When a short repro
does not reproduce in a fresh interpreter, the job falls back to the long form
(writer_full.py), which carries tcompile's own helpers.
"""

from __future__ import annotations

from tcompile.compiler import accuracy_rule

# How tcompile names a failure: stage/kind: ExcType: the error's first line, scrubbed of
# addresses, paths, hashes and numbers (signature.py: root_cause, normalize_message).
SIGNATURE = """
def signature(kind, exc):  # as tcompile names a failure: stage/kind: type: first line, scrubbed
    while isinstance(inner := getattr(exc, "inner_exception", None) or getattr(exc, "real_exception", None)
                     or (exc.__cause__ if type(exc).__name__ in WRAPPERS else None), BaseException):
        exc = inner  # the real error inside torch's wrappers (BackendCompilerFailed, InductorError)
    mod, name = type(exc).__module__, type(exc).__name__
    name = name if mod in ("builtins", "__main__") else f"{mod.rsplit('.', 1)[-1]}.{name}"
    text = next((ln for ln in str(exc).strip().splitlines() if ln.strip()), "")
    for pattern, repl in SCRUBS:
        text = re.sub(pattern, repl, text)
    text = text.strip()[:300]
    return f"{STAGE}/{kind}: {name}" + (f": {text}" if text else "")
"""

# How tcompile judges compiled numbers: generated from the rule itself
# (compiler/accuracy_rule.py, its short form), never restated here.
LOOSE = "\n" + accuracy_rule.portable_source("differs_loose")

STRICT = "\n" + accuracy_rule.portable_source("differs_strict")

# outputs, and the gradients of a fixed random projection of them (accuracy.run_with_grads)
GRADS = """
def run(fn, inputs, dtype=None):  # gradients of a fixed random projection of the outputs
    leaves = [x.detach().clone().to(dtype or x.dtype).requires_grad_(x.requires_grad)
              if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs]
    args = [x.clone() if torch.is_tensor(x) and x.requires_grad else x for x in leaves]
    outs = [o for o in torch.utils._pytree.tree_leaves(fn(*args)) if getattr(o, "requires_grad", 0)]
    g = torch.Generator().manual_seed(1234)
    loss = sum((o * torch.randn(o.shape, generator=g, dtype=torch.float64).to(o)).sum() for o in outs)
    leaves = [a for a in leaves if torch.is_tensor(a) and a.requires_grad]
    return [], [x for x in torch.autograd.grad(loss, leaves, allow_unused=True) if x is not None]
"""

# The program called the graph under torch.autocast: the forward runs under it, the
# backward outside it (as the program's did); the float64 reference rounds what the
# autocast rounds (float64.py) -- {autocast} and {rounded} filled in by writer.py
AUTOCAST = """
AUTOCAST = {autocast}  # the program called this graph under torch.autocast


def forward(fn, args):  # the forward under the program's autocast; its backward runs outside
    with contextlib.ExitStack() as stack:
        for device, dtype in AUTOCAST:
            stack.enter_context(torch.autocast(device, dtype=dtype))
        return fn(*args)
"""

F64_AUTOCAST = """
ROUNDED = {rounded}  # torch calls (in order) whose results the autocast rounds


class F64(torch.overrides.TorchFunctionMode):  # float64, rounding what the program's autocast rounds
    def __init__(self, mod):
        super().__init__()
        self.mod, self.calls = mod.to(torch.float64), 0

    def __call__(self, *args):
        with self:
            return self.mod(*args)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        to = ROUNDED.get(self.calls, torch.float64)
        self.calls += 1
        up = lambda v: v.to(to).double() if torch.is_tensor(v) and v.is_floating_point() else v  # noqa: E731
        args, kwargs = torch.utils._pytree.tree_map(up, (args, kwargs or {}))
        return torch.utils._pytree.tree_map(up, func(*args, **kwargs))
"""

NO_GRADS = """
def run(fn, inputs, dtype=None):  # the outputs, on private copies of the inputs
    args = [x.detach().clone().to(dtype or x.dtype).requires_grad_(x.requires_grad)
            if torch.is_tensor(x) and x.is_floating_point() else x for x in inputs]
    outs = torch.utils._pytree.tree_leaves(fn(*args))  # nested tuples too (a pool's indices)
    return [o.detach() for o in outs if torch.is_tensor(o)], []
"""

# A failure that kills the process (a C++ throw in generated code, a CUDA fault): the
# check runs in a child; a signal is the identity (crash.py), plus the dying words.
CRASH_MAIN = """
def test_fn():  # True when the failure does not show; the check runs in a child: it may die
    proc = subprocess.run([sys.executable, __file__, "--child", *sys.argv[1:]],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = [ln[2:] for ln in proc.stdout.splitlines() if ln.startswith("@@")]
    if proc.returncode < 0:  # killed by a signal: the crash
        why = next((ln.strip() for ln in proc.stderr.splitlines() if any(w in ln for w in DYING)), "")
        said = [f"REPRODUCED: {STAGE}/crash: {signal.Signals(-proc.returncode).name}: "
                + scrub(why or f"process killed by {signal.Signals(-proc.returncode).name}")]
    SEEN[:] = [said[0] if said else f"ERROR: the check failed:\\n{proc.stderr[-2000:]}"]
    return SEEN[0] == "NOT REPRODUCED"


SEEN = [None]
if __name__ == "__main__":
    if "--child" in sys.argv:  # the check itself: it may die of the bug
        sig = check()
        print("@@" + (f"REPRODUCED: {sig}" if sig else "NOT REPRODUCED"), flush=True)
        sys.exit(0)
    passed = test_fn()
    print(SEEN[0])
    sys.exit(0 if passed else 1 if SEEN[0].startswith("REPRODUCED") else 2)
"""

SCRUB = """
def scrub(text):  # tcompile's normalize_message: addresses, paths, hashes, numbers
    for pattern, repl in SCRUBS:
        text = re.sub(pattern, repl, text)
    return text.strip()[:300]
"""

MAIN = """
def test_fn():  # True when the failure does not show (as torch's CompilerBisector wants)
    global SEEN
    torch._dynamo.reset()  # each call compiles afresh (else the recompile limit turns it eager)
    SEEN = check()
    return SEEN is None


if __name__ == "__main__":
    try:
        passed = test_fn()
    except Exception as exc:  # not the failure being shown: never "reproduced"
        sys.exit(print(f"ERROR: the check itself failed: {type(exc).__name__}: {exc}") or 2)
    print("NOT REPRODUCED" if passed else f"REPRODUCED: {SEEN}")
    sys.exit(0 if passed else 1)
"""

DYING = (
    "terminate called",
    "Segmentation fault",
    "Aborted",
    "Fatal Python error",
    "illegal memory",
)
