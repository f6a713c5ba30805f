"""The source engine (minifier/source.py) on pure predicates: no torch, no worker.
Each pass alone, the gate, and the property that the result still fails and is never
larger than the start."""

import ast
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tcompile.minifier import source as S
from tcompile.minifier.verdict import Verdict

GATE = """
def forward(self, x):
    y = self.norm(x)
    z = y * 2
    print('debug', z.shape)
    w = torch.relu(z)
    return self.out(w)
"""


def _calls(oracle):
    seen = []

    def wrapped(src):
        seen.append(src)
        return oracle(src)

    return wrapped, seen


def _fails_if(*needles):
    return lambda src: Verdict.SAME_FAILURE if all(n in src for n in needles) else Verdict.PASS


def test_the_statement_that_fails_is_all_that_is_left():
    oracle, seen = _calls(_fails_if("print("))
    out = S.minify_source(GATE, "forward", oracle)
    fn = ast.parse(out.source).body[0]
    # an optional argument of the call goes too (drop_call_arguments)
    assert [ast.unparse(s) for s in fn.body] == ["print('debug')"]
    assert [a.arg for a in fn.args.args] == []  # self and x are gone
    assert out.calls == len(seen) and out.calls <= 16
    assert len(set(seen)) == len(seen)  # the gate: nothing is asked twice


def test_a_computed_value_becomes_an_input():
    values = {"z": {"tensor": {"shape": [2, 3], "dtype": "float32"}}}
    hints = S.Hints(values=lambda src: values)
    out = S.minify_source(GATE, "forward", _fails_if("print('debug', z.shape)"), hints=hints)
    bindings, inputs = S.literals(out.source)
    assert inputs == {"z": {"shape": [2, 3], "dtype": "float32"}}
    assert "z" in [a.arg for a in ast.parse(out.source).body[-1].args.args]
    assert "z * 2" not in out.source and "y" not in out.source.split("def")[1]


def test_inlining_a_module_call_and_its_attributes():
    src = "def forward(self, x):\n    h = self.lin(x)\n    if h.sum() > 0:\n        return h\n"
    callees = {
        "self.lin": {
            "kind": "module",
            "source": "def forward(self, input):\n    return F.linear(input, self.weight, self.bias)\n",
        }
    }
    attrs = {"self.lin.weight": {"tensor": {}}, "self.lin.bias": {"tensor": {}}}
    hints = S.Hints(callees=callees, attrs=attrs)

    # fails while the branch on h stays and h still comes from a linear layer
    # (and F.linear keeps its three arguments: with fewer it would not run)
    def oracle(src):
        linear = "self.lin(x)" in src or re.search(r"linear\(\w+, [\w.]+, [\w.]+\)", src)
        return _fails_if("if h.sum() > 0")(src) if linear else Verdict.PASS

    out = S.minify_source(src, "forward", oracle, hints=hints)
    bindings, _ = S.literals(out.source)
    assert "F.linear(x, lin_weight, lin_bias)" in out.source
    assert bindings == {"lin_weight": "self.lin.weight", "lin_bias": "self.lin.bias"}
    assert "self" not in out.source.split("def forward")[1]
    assert out.history[0] == "inline self.lin"


def test_a_call_gives_way_to_its_argument_and_loses_optional_ones():
    src = "def forward(x, w, b, act):\n    return getattr(torch, act)(F.linear(x, w, b), dim=-1)\n"
    out = S.minify_source(src, "forward", _fails_if("getattr(torch, act)("))
    assert out.source.split("def forward")[1] == "(x, act):\n    return getattr(torch, act)(x)\n"
    assert "F.linear(...) -> x" in out.history
    assert any(h.startswith("drop a keyword argument") for h in out.history)


def test_a_copy_is_forwarded_to_its_readers():
    src = "def forward(x, w):\n    h = w\n    h = torch.sin(h)\n    return h + x\n"
    out = S.minify_source(src, "forward", _fails_if("torch.sin(w)"))
    assert out.source.split("def forward")[1] == "(w):\n    h = torch.sin(w)\n"
    assert "h = w forwarded" in out.history


def test_nested_calls_are_lifted_before_inlining_and_locals_renamed():
    src = "def forward(self, x):\n    return torch.relu(self.f(x)) + 1\n"
    callees = {
        "self.f": {"kind": "method", "source": "def f(self, a):\n    t = a * 3\n    return t\n"}
    }
    out = S.minify_source(src, "forward", _fails_if("* 3"), hints=S.Hints(callees=callees))
    tree = ast.parse(out.source)
    compile(out.source, "<t>", "exec")
    assert "self.f(" not in out.source and "* 3" in out.source
    assert "a" not in {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def test_constants_become_literals_and_module_lists_unroll():
    src = (
        "def forward(self, x):\n"
        "    for b in self.blocks:\n"
        "        x = b(x) * self.scale\n"
        "    return x\n"
    )
    hints = S.Hints(attrs={"self.scale": {"constant": "0.5"}}, lengths={"self.blocks": 2})

    def oracle(s):  # fails while a block is called and its output scaled
        return (
            Verdict.SAME_FAILURE if "blocks" in s and ("scale" in s or "0.5" in s) else Verdict.PASS
        )

    out = S.minify_source(src, "forward", oracle, hints=hints)
    assert "for " not in out.source and "self.scale" not in out.source
    assert "(x) * 0.5" in out.source and out.history[:2] == [
        "unroll self.blocks",
        "attributes to inputs (all)",
    ]


def test_a_block_keeps_a_statement_and_branches_fold():
    src = (
        "def f(x):\n    if x > 0:\n        y = x + 1\n    else:\n        y = x - 1\n    return y\n"
    )
    out = S.minify_source(src, "f", _fails_if("if x > 0"))
    assert ast.unparse(ast.parse(out.source)) == "def f(x):\n    if x > 0:\n        pass"


def test_an_oracle_that_raises_or_is_invalid_never_keeps_a_candidate():
    def oracle(src):
        if "print" not in src:
            raise RuntimeError("worker died")
        return Verdict.INVALID

    out = S.minify_source(GATE, "forward", oracle)
    assert out.source == ast.unparse(ast.parse(GATE)) + "\n" and out.history == []


def test_limits_stop_the_search():
    out = S.minify_source(GATE, "forward", _fails_if("print("), max_calls=2)
    assert out.calls == 2
    stopped = S.minify_source(GATE, "forward", _fails_if("print("), stop=lambda: True)
    assert stopped.calls == 0 and stopped.stopped


_STATEMENTS = [f"v{i} = v{i - 1} + {i}" if i else "v0 = x * 2" for i in range(8)]


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 7), min_size=1, max_size=3), st.integers(1, 8))
def test_property_the_result_fails_and_is_never_larger(needed, n):
    body = _STATEMENTS[:n] + ["return x"]
    src = "def f(x):\n" + "".join(f"    {s}\n" for s in body)
    wanted = [f"+ {i}" if i else "x * 2" for i in needed if i < n]

    def oracle(s):
        return Verdict.SAME_FAILURE if all(w in s for w in wanted) else Verdict.PASS

    out = S.minify_source(src, "f", oracle)
    assert oracle(out.source) is Verdict.SAME_FAILURE
    assert S.size(out.source) <= S.size(src)
    compile(out.source, "<r>", "exec")
