"""The cause of a failure: what was raised, and the program's own line that raised it.

"Does the program fail the same way without torch.compile?" is asked of two runs whose
errors are worded by different code.  Eager says ``mat1 and mat2 shapes cannot be
multiplied (32x1568 and 2048x10)``; Dynamo, tracing the same line with fake tensors,
wraps a meta kernel's ``a and b must have same reduction dim`` in ``TorchRuntimeError:
RuntimeError when making fake tensor call``; a compiled kernel says ``index out of
bounds: 0 <= tmp13 < 10L`` where eager says ``index out of range in self``.  Messages
cannot be compared; causes can:

* **the raised type**: the innermost error below torch's wrappers (Dynamo's and
  inductor's exceptions that carry another as their cause or context), with its bases --
  two causes agree when one's type is the other's or a subclass of it
  (``FakeTensorDeviceMismatchError`` is a ``RuntimeError``); an error of Dynamo's own
  with nothing below it agrees only with itself;
* **the raising frame**: the innermost frame of the program's own code
  (owners.py) on the whole stack -- the traceback, then the frames Dynamo was tracing
  (``real_stack``), and inside an FX graph's generated code the user line its node came
  from (the node's ``stack_trace``).

Pure Python, no torch import.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .owners import frame_file, innermost_user, own_folders  # noqa: F401 (own_folders: warm)

# torch's exceptions that wrap the error that was actually raised
_WRAPPER_MODULES = ("torch._dynamo.exc", "torch._inductor.exc")
_TRACE_LINE = re.compile(r'File "(.+?)", line (\d+), in (\S+)')


@dataclasses.dataclass(frozen=True)
class Cause:
    types: tuple[str, ...]  # 'module.Class' of the raised error, then its bases
    frame: str = ""  # the program's raising frame: 'path:line in name'

    @property
    def wrapped_only(self) -> bool:
        """An error of Dynamo's or inductor's own, with nothing below it."""
        return bool(self.types) and self.types[0].startswith(_WRAPPER_MODULES)

    def same(self, other: Cause | None) -> bool:
        """Both raised from the same line of the program, errors of one kind."""
        if other is None or not self.frame or not other.frame:
            return False
        if _place(self.frame) != _place(other.frame):
            return False
        return compatible(self, other)

    def to_json(self) -> dict[str, Any]:
        return {"types": list(self.types), "frame": self.frame}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Cause | None:
        if not data or not data.get("types"):
            return None
        return cls(types=tuple(data["types"]), frame=str(data.get("frame") or ""))

    @classmethod
    def from_exception(cls, exc: BaseException) -> Cause:
        real = unwrap(exc)
        types = tuple(
            f"{t.__module__}.{t.__qualname__}"
            for t in type(real).__mro__
            if t not in (BaseException, Exception, object)
        )
        frames, asserted = whole_stack(exc)
        if asserted and "builtins.AssertionError" not in types:
            # Dynamo turns ``assert cond, msg`` into an assert op that raises
            # RuntimeError(msg) in the graph: eager raises AssertionError at that line
            types = (*types, "builtins.AssertionError")
        return cls(types=types, frame=innermost_user(frames))


def user_frames(exc: BaseException) -> list[str]:
    """The program's own frames on the whole stack of ``exc`` (whole_stack), outermost
    first: where each of its calls was when the error was raised."""
    from .owners import is_user

    frames, _ = whole_stack(exc)
    out: list[str] = []
    for f in frames:
        if is_user(frame_file(f)) and f not in out[-1:]:
            out.append(f)
    return out


def died_where_raised(crash: list[str], raised: list[str]) -> bool:
    """A process killed by a signal inside compiled code (``crash``: the program's frames
    when it died, outermost first; crash.fatal_stack) was where the other run raised
    (``raised``: user_frames): the same calls from the program's entry down to the
    compiled frame, and that frame the same function of the same file -- its line is
    not comparable, a frame Dynamo compiled reports its ``def`` line.  Eager raising
    IndexError at ``tok_emb = self.wte(idx)`` where the compiled kernel aborted on the
    same bad index, inside the same ``forward`` called from the same line, is one
    failure: the program's own."""
    if not crash or len(raised) < len(crash):
        return False
    for k, (a, b) in enumerate(zip(crash, raised)):
        if k < len(crash) - 1 and _place(a) != _place(b):
            return False
    last, there = crash[-1], raised[len(crash) - 1]
    return frame_file(last) == frame_file(there) and _name(last) == _name(there)


def _name(frame: str) -> str:
    return frame.rpartition(" in ")[2]


def compatible(a: Cause, b: Cause) -> bool:
    if not a.types or not b.types:
        return False
    if a.types[0] == b.types[0]:
        return True
    if a.wrapped_only or b.wrapped_only:
        return False
    return a.types[0] in b.types or b.types[0] in a.types


# what a check raises (torch's TORCH_CHECK and its kin, a generated assert): a compiled
# graph rejecting what eager rejects may say it as another of these (a kernel's "index
# out of bounds", a RuntimeError, where eager's embedding raises IndexError)
_CHECKS = frozenset(f"builtins.{t}" for t in (
    "RuntimeError", "IndexError", "ValueError", "TypeError", "AssertionError"))  # fmt: skip


def same_kind(compiled: BaseException, eager: BaseException) -> bool:
    """The compiled graph raised an error of eager's kind (``compatible``), or both
    raised a check's error (``_CHECKS``): the program's own error, the input rejected
    both ways.  Anything else (an OSError, a KeyError, an ImportError where eager's
    check raised) is the compiled graph's failure, never swallowed as the program's own
    (issue 64: a program that catches every error, checking that eager's was raised,
    read as clean)."""
    a, b = Cause.from_exception(compiled), Cause.from_exception(eager)
    return compatible(a, b) or bool(_CHECKS & set(a.types) and _CHECKS & set(b.types))


def unwrap(exc: BaseException) -> BaseException:
    """Below torch's wrappers: the error that was raised."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        if not type(exc).__module__.startswith(_WRAPPER_MODULES):
            break
        inner = (
            getattr(exc, "inner_exception", None)
            or getattr(exc, "real_exception", None)
            or exc.__cause__
            or exc.__context__
        )
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return exc


def whole_stack(exc: BaseException) -> tuple[list[str], bool]:
    """The frames from the program's entry to the raise, outermost first: the
    traceback of ``exc``, then the frames Dynamo was tracing when it raised (the
    ``real_stack`` of it or of an exception it wraps), then the traceback of the error
    below torch's wrappers.  A frame of an FX graph's
    generated code is followed by the user frame its node came from; the flag says
    that the innermost such node is an assert op."""
    frames: list[str] = []
    asserted = False
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append(f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}")
        if code.co_filename.startswith("<eval_with_key"):
            origin, asserted = _graph_node_origin(tb.tb_frame, tb.tb_lineno)
            if origin:
                frames.append(origin)
        tb = tb.tb_next
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        stack = getattr(e, "real_stack", None)
        if stack:
            frames.extend(f"{fs.filename}:{fs.lineno} in {fs.name}" for fs in stack)
            break
        e = e.__cause__ or e.__context__
    real = unwrap(exc)
    if real is not exc:  # below the wrappers: where the real error was raised
        tb = real.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            frames.append(f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}")
            tb = tb.tb_next
    return frames, asserted


def _graph_node_origin(frame: Any, lineno: int) -> tuple[str, bool]:
    """In an FX graph's generated code, the user frame the node on ``lineno`` came from
    (its ``stack_trace``: Dynamo's record of the user line it traced), and whether the
    node is an assert op.  Duck-typed: the GraphModule is the frame's ``self``."""
    try:
        gm = frame.f_locals.get("self")
        index = (getattr(gm, "_lineno_map", None) or {}).get(lineno - frame.f_code.co_firstlineno)
        if index is None:
            return "", False
        node = list(gm.graph.nodes)[index]
        trace = str(node.meta.get("stack_trace") or "")
        asserted = "assert" in str(getattr(node, "target", "")).lower()
    except Exception:
        return "", False
    places = _TRACE_LINE.findall(trace)
    if not places:
        return "", asserted
    path, line, name = places[-1]
    return f"{path}:{line} in {name}", asserted


def _place(frame: str) -> tuple[str, str]:
    """(file, line) of a frame: the same source line, whatever the function is called."""
    path = frame_file(frame)
    rest = frame[len(path) + 1 :]
    return path, rest.split(" ", 1)[0]
