"""A worker that judges candidate *source* for a capture failure (``tcompile minify``
of a frame that failed in TorchDynamo: there is no graph, only code).

It loads the record once (the parent checked that it is trusted and passes the
payload's SHA-256) and rebuilds the frame: its function, arguments, globals and
closure.  Entries are functions the minifier may start from: entry 0 is the recorded
frame (or, when that frame is torch's own wrapper around a module, the module's
``forward``); ``entries`` runs entry 0 eagerly once and adds the user functions it
calls, with their arguments as they were, so the search can step into the callee
where the failure is raised instead of shrinking the whole model around it.

Each request names an entry and a candidate module source: the function (named as
the entry's), helpers, and two optional literals the passes write --
``__bindings__`` (a new parameter bound to an expression over the entry's arguments,
``{"w": "self.proj.weight"}``) and ``__inputs__`` (a parameter made fresh from a spec:
shape, dtype, fill).  The verdict compiles the candidate with the recorded
``torch.compile`` options (backend ``eager`` unless told otherwise: a capture failure
happens before any backend runs) and compares the failure with the recorded one by
its FailureSignature.

Run as ``python -c CAPTURE_WORKER RECORD SHA256`` (protocol.py); requests and answers
are JSON lines on the two pipes named in ``TCOMPILE_CAPTURE_FDS``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ...minifier.verdict import Verdict
from .capture_entries import Entry, SourceUnavailable, call_args, callee_entries, root_entry
from .capture_info import describe, local_values, module_info

if TYPE_CHECKING:
    import types
    from collections.abc import Callable, Mapping
    from typing import TypedDict

    from ..signature import FailureSignature

    class CaptureRequest(TypedDict, total=False):
        """One request of compiler/capture_pool.py (a JSON line)."""

        id: int
        op: str  # judge (the default) | entries | info | values | describe
        entry: int  # the entry it is about (0: the recorded frame)
        source: str  # a candidate's module source
        backend: str | None  # judge: the backend to compile with (eager unless told)
        user_stack: list[str]  # entries: the failure's user stack
        stop: bool

    class _CompileKwargs(TypedDict):
        backend: str
        fullgraph: bool
        dynamic: bool | None


FDS_ENV = "TCOMPILE_CAPTURE_FDS"  # compiler/capture_pool.py names the same variable


def main(argv: list[str]) -> int:
    from .hooks import watch_parent

    watch_parent()
    import torch

    from ..record_format import read_info
    from ..signature import FailureSignature
    from .replay_driver import _arguments, _load_tcompile, _load_torch, build
    from .torch_config import apply_module_diffs

    info = read_info(argv[0])
    sha = argv[1] if len(argv) > 1 and argv[1] != "-" else None
    loaded = _load_tcompile(info, sha) if info.kind == "tcompile" else _load_torch(argv[0])
    apply_module_diffs("torch._dynamo.config", loaded.get("dynamo_config") or {})
    apply_module_diffs("torch._inductor.config", loaded.get("inductor_config") or {})
    fn, args, kwargs, _missing = build(loaded)
    options = dict(loaded.get("compile") or {})
    target = FailureSignature.from_json(info.meta.get("signature") or {})
    history = [_arguments(fn.__code__, h)[:2] for h in loaded.get("history") or []]
    try:
        root = root_entry(fn, args, kwargs, torch, history)
    except SourceUnavailable as exc:  # said to the parent, which ends with it
        rfd, wfd = (int(x) for x in os.environ[FDS_ENV].split(","))
        with os.fdopen(wfd, "w", buffering=1) as replies:
            replies.write(
                json.dumps({"ready": True, "name": fn.__name__, "error": str(exc)}) + "\n"
            )
        return 0
    state = _State(torch, options, target, root)
    state.guards = list(info.meta.get("guard_failures") or [])
    state.config = {
        "torch._dynamo.config": loaded.get("dynamo_config") or {},
        "torch._inductor.config": loaded.get("inductor_config") or {},
    }
    rfd, wfd = (int(x) for x in os.environ[FDS_ENV].split(","))
    with os.fdopen(rfd, "r") as requests, os.fdopen(wfd, "w", buffering=1) as replies:
        root = state.entries[0]
        replies.write(json.dumps({"ready": True, **root.to_json(0)}) + "\n")
        for line in requests:
            req = json.loads(line)
            if req.get("stop"):
                break
            try:
                reply = state.handle(req)
            except Exception as exc:  # a request the worker cannot answer: invalid
                reply = {
                    "verdict": Verdict.INVALID.value,
                    "error": f"{type(exc).__name__}: {exc}"[:300],
                }
            replies.write(json.dumps({"id": req.get("id"), **reply}, default=str) + "\n")
    os._exit(0)


class _State:
    def __init__(
        self,
        torch: types.ModuleType,
        options: dict[str, Any],  # the recorded torch.compile options
        target: FailureSignature,
        root: Entry,
    ) -> None:
        self.torch, self.options, self.target = torch, options, target
        self.entries = [root]
        self.guards: list[str] = []  # a recompilation failure: the guards that failed
        self.config: dict[str, dict[str, object]] = {}  # the config the program changed

    def handle(self, req: CaptureRequest) -> Mapping[str, object]:
        op = req.get("op", "judge")
        if op == "entries":
            more = callee_entries(self.entries[0], self.torch, req.get("user_stack") or [])
            self.entries = self.entries[:1] + more
            return {"entries": [e.to_json(i) for i, e in enumerate(self.entries)]}
        entry = self.entries[int(req.get("entry", 0))]
        if op == "info":
            return module_info(entry, self.torch)
        if op == "values":
            return {"values": local_values(entry, req["source"], self.torch)}
        if op == "describe":
            return {**describe(entry, req["source"], self.torch), "config": _plain(self.config)}
        return self.judge(entry, req["source"], req.get("backend"))

    def judge(self, entry: Entry, source: str, backend: str | None) -> dict[str, object]:
        from ..signature import FailureSignature, guard_failures, scrub_guards
        from .session import guard_reasons, is_dynamo_exception

        torch = self.torch
        try:
            scope = dict(entry.namespace)
            exec(compile(source, "<candidate>", "exec"), scope)  # noqa: S102
            fn = scope[entry.name]
            memo: dict[int, object] = {}  # the calls of one judgement share their objects
            kwargs = call_args(entry, fn, scope, self.torch, memo=memo)
        except Exception as exc:
            return {"verdict": Verdict.INVALID.value, "error": f"{type(exc).__name__}: {exc}"[:300]}
        kw: _CompileKwargs = {
            "backend": backend or "eager",
            "fullgraph": bool(self.options.get("fullgraph")),
            "dynamic": self.options.get("dynamic"),
        }
        torch._dynamo.reset()
        seen_guards = 0
        try:
            compiled = torch.compile(fn, **kw)
            for earlier in entry.history:  # the calls before the one that failed
                compiled(**call_args(entry, fn, scope, torch, earlier, memo=memo))
            seen_guards = len(guard_reasons(fn.__code__))
            compiled(**kwargs)
        except Exception as exc:
            capture = is_dynamo_exception(exc)
            sig = FailureSignature.from_exception(
                "eager" if capture else kw["backend"], "capture" if capture else "runtime", exc
            )
            if capture and self.guards:  # a recompilation: the same guards must fail
                now = guard_reasons(fn.__code__)[seen_guards:]
                failed = scrub_guards(now) or guard_failures(str(exc))
                sig = dataclasses.replace(sig, guards=tuple(failed))
            target = dataclasses.replace(self.target, guards=tuple(self.guards))
            same = capture and target.matches(sig)
            if same and not self.runs_eagerly(entry, fn, scope):
                # it fails in Dynamo, but it is not a program: without torch.compile it
                # raises too (a name whose definition a pass deleted, say)
                return {"verdict": Verdict.INVALID.value, "error": "fails without torch.compile"}
            verdict = (Verdict.SAME_FAILURE if same else Verdict.OTHER_FAILURE).value
            return {"verdict": verdict, "signature": sig.to_json()}
        return {"verdict": Verdict.PASS.value}

    def runs_eagerly(self, entry: Entry, fn: Callable[..., object], scope: dict[str, Any]) -> bool:
        try:
            fn(**call_args(entry, fn, scope, self.torch))
        except Exception:
            return False
        return True


def _plain(config: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
    """Config entries a repro can set as literals."""
    return {
        mod: {k: v for k, v in diffs.items() if isinstance(v, (bool, int, float, str, type(None)))}
        for mod, diffs in config.items()
    }


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
