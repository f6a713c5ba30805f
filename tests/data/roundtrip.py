"""Every graph of every fixture, saved and loaded back (tests/e2e/test_graph_roundtrip.py).

``python roundtrip.py capture OUT ARGS.json FIXTURE...``: runs each fixture (as its user
runs it: its own folder, its own argv) with ``torch.compile`` routed through a backend
that keeps every Dynamo graph and every AOT graph (forward, backward, inference, after
inductor's decompositions -- where ``prims.fma`` and friends appear) as tcompile saves
graphs (compiler/graph_io.py), with the inputs of its first call and the outputs the
graph itself gives on them (twice: a graph that does not agree with itself is marked).

``python roundtrip.py load OUT``: a fresh interpreter that imported torch and nothing
else of it -- as tcompile's parent process is -- loads each graph and runs it on the
same inputs (with the program's folder importable, as in a minifier worker, which is
the program: a custom op's module imports); prints one JSON line: graphs, failures to
load or save, outputs that differ, and the op namespaces the graphs held.
"""

from __future__ import annotations

import functools
import io
import json
import os
import runpy
import signal
import sys
from pathlib import Path
from typing import Any


def _clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    return value


def _run(gm: Any, args: list[Any]) -> Any:
    import torch

    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        # outside the program's own autocast: the loading process has none
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            return _clone(gm(*_clone(args)))
    finally:
        torch.random.set_rng_state(state)


def _same(a: Any, b: Any) -> bool:
    import torch

    try:
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        return True
    except Exception:  # noqa: BLE001 -- any difference
        return False


class _Keep:
    """The first call of one graph: its data, inputs and outputs, saved once."""

    count = 0

    def __init__(self, out: Path, fixture: str, kind: str, gm: Any) -> None:
        self.out, self.fixture, self.kind, self.gm, self.done = out, fixture, kind, gm, False

    def first(self, args: list[Any]) -> None:
        if self.done:
            return
        self.done = True
        import torch

        from tcompile.compiler.graph_io import to_data

        _Keep.count += 1
        record: dict[str, Any] = {"fixture": self.fixture, "kind": self.kind}
        try:
            inputs = _clone(list(args))
            first, second = _run(self.gm, inputs), _run(self.gm, inputs)
            record |= {
                "graph": to_data(self.gm),
                "inputs": inputs,
                "outputs": first,
                "deterministic": _same(first, second),
            }
        except Exception as exc:  # noqa: BLE001 -- said in the record, not hidden
            record = {**record, "capture_error": f"{type(exc).__name__}: {exc}"[:300]}
        buf = io.BytesIO()
        try:
            torch.save(record, buf)
        except Exception as exc:  # noqa: BLE001 -- a graph that cannot be saved: a finding
            buf = io.BytesIO()
            error = f"cannot save: {type(exc).__name__}: {exc}"[:300]
            torch.save({"fixture": self.fixture, "kind": self.kind, "save_error": error}, buf)
        (self.out / f"{_Keep.count:04d}.pt").write_bytes(buf.getvalue())


def _backend(out: Path, fixture: str) -> Any:
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func
    from torch._inductor.decomposition import select_decomp_table

    def backend(gm: Any, example_inputs: list[Any]) -> Any:
        dynamo = _Keep(out, fixture, "dynamo", gm)

        def aot(g: Any, _inputs: list[Any]) -> Any:
            keep = _Keep(out, fixture, "aot", g)

            def run(*args: Any) -> Any:
                keep.first(list(args))
                return g(*args)

            return make_boxed_func(run)

        compiled = aot_module_simplified(
            gm,
            example_inputs,
            fw_compiler=aot,
            bw_compiler=aot,
            decompositions=select_decomp_table(),
        )

        def call(*args: Any) -> Any:
            dynamo.first(list(args))
            return compiled(*args)

        return call

    return backend


def capture(out: Path, argv_of: dict[str, list[str]], fixtures: list[str]) -> None:
    import torch

    original = torch.compile
    here = os.getcwd()
    for fixture in fixtures:
        path = Path(fixture).resolve()

        @functools.wraps(original)
        def compile(model: Any = None, _path: Path = path, **kwargs: Any) -> Any:
            for key in ("backend", "mode", "options"):
                kwargs.pop(key, None)
            if model is None:
                return lambda m: compile(m, **kwargs)
            return original(model, backend=_backend(out, str(_path)), **kwargs)

        torch.compile = compile
        torch._dynamo.reset()
        sys.argv = [str(path), *argv_of.get(path.name, [])]
        sys.path.insert(0, str(path.parent))
        os.chdir(path.parent)
        signal.alarm(120)  # a fixture that runs long keeps the graphs it got to
        try:
            runpy.run_path(str(path), run_name="__main__")
        except BaseException:  # noqa: BLE001 -- fixtures fail on purpose
            pass
        finally:
            signal.alarm(0)
            os.chdir(here)
            sys.path.remove(str(path.parent))
            torch.set_default_dtype(torch.float32)
            torch.set_grad_enabled(True)
    torch.compile = original


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError("fixture ran past 120 s")


def _namespaces(data: dict[str, Any]) -> set[str]:
    """The op namespaces a saved graph calls (``hop`` for higher-order ops), nested
    graphs included."""
    found = set()
    for n in data["nodes"]:
        t = n["target"]
        if isinstance(t, tuple) and t[0] in ("overload", "packet"):
            found.add(t[1].split("::")[0])
        elif isinstance(t, tuple) and t[0] == "hop":
            found.add("hop")
    for spec in data["attrs"].values():
        if "graph" in spec:
            found |= _namespaces(spec["graph"])
    return found


def load(out: Path) -> dict[str, Any]:
    import torch

    from tcompile.compiler.graph_io import from_data

    seen: dict[str, Any] = {
        "graphs": 0,
        "load_errors": [],
        "save_errors": [],
        "differ": [],
        "capture_errors": 0,
        "kinds": {},
        "namespaces": {},
    }
    for f in sorted(out.glob("*.pt")):
        record = torch.load(f, weights_only=False)
        if "save_error" in record:
            seen["save_errors"].append(f"{Path(record['fixture']).name}: {record['save_error']}")
            continue
        if "capture_error" in record:
            seen["capture_errors"] += 1
            continue
        seen["graphs"] += 1
        seen["kinds"][record["kind"]] = seen["kinds"].get(record["kind"], 0) + 1
        for ns in _namespaces(record["graph"]):
            seen["namespaces"][ns] = seen["namespaces"].get(ns, 0) + 1
        where = f"{Path(record['fixture']).name} {record['kind']} {f.name}"
        # a minifier worker is the program itself: its modules (a custom op's) import
        folder = str(Path(record["fixture"]).parent)
        if folder not in sys.path:
            sys.path.append(folder)
        try:
            gm = from_data(record["graph"])
            got = _run(gm, record["inputs"])
        except Exception as exc:  # noqa: BLE001 -- the finding
            seen["load_errors"].append(f"{where}: {type(exc).__name__}: {exc}"[:300])
            continue
        if record["deterministic"] and not _same(got, record["outputs"]):
            seen["differ"].append(where)
    return seen


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, _alarm)
    if sys.argv[1] == "capture":
        capture(Path(sys.argv[2]), json.loads(Path(sys.argv[3]).read_text()), sys.argv[4:])
        os._exit(0)  # a fixture's threads or atexit hooks are not this run's business
    print(json.dumps(load(Path(sys.argv[2]))))
