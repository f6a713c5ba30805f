"""Failure identity (DESIGN.md mechanism 6).

A :class:`FailureSignature` decides "same bug" versus "different bug".  It is built
from the stage that failed, the kind of failure, the exception type, a normalised
message (numbers, addresses, paths and temporary names scrubbed) and the innermost
frame that is not tcompile's own.  Two signatures *match* when stage, kind and
exception type agree and the normalised messages agree; the frame is reported but
not compared, because the same bug raises from different lines across torch versions.

This module is pure Python (no torch import) so that the CLI, the minifier and the
tests can use it freely.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import traceback
from typing import Any


class FailureKind(str, enum.Enum):
    """Where in the life of a compiled graph the failure showed."""

    CAPTURE = "capture"  # TorchDynamo could not capture the frame
    COMPILE = "compile"  # the backend raised while compiling a graph
    RUNTIME = "runtime"  # the compiled graph raised while running
    ACCURACY = "accuracy"  # the compiled graph computed wrong numbers
    CRASH = "crash"  # the process died (signal, abort, C++ throw)
    TIMEOUT = "timeout"  # the process ran past --timeout
    # the compiled graph returned where eager raises on the same inputs: a decomposition
    # or lowering dropped an op's check of its arguments (issue 63: lost validation)
    MISSING_ERROR = "missing_error"
    # a gradient hook on a compiled graph's output that does not see what eager passes
    # through it: the gradient flows inside the compiled backward (child/tensor_hooks.py)
    HOOK = "hook"


# the kinds a run saves with their graph and its inputs (a capture: bisect and minify
# judge it without the program); a crash or a timeout leaves no process to save it
CAPTURED_KINDS = (
    FailureKind.COMPILE.value,
    FailureKind.ACCURACY.value,
    FailureKind.RUNTIME.value,
    FailureKind.MISSING_ERROR.value,
)


SCRUBS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"(/[\w.\-+]+)+/"), "<path>/"),  # directories of absolute paths
    (re.compile(r"\b[a-z0-9]{20,}\b"), "<hash>"),  # cache keys, kernel hashes
    (re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?"), "N"),
    # autograd names the node that made a saved tensor: the program's history, not the bug
    (re.compile(r", which is output N of [\w:<>]+,"), ""),
    # a place in a source file ("Recompiling function forward in <path>/model.py:N"): the
    # same code re-run from a minified copy or a repro.py is the same failure
    (re.compile(r"(<path>/)?(<candidate>|[\w.\-]+\.py):N\b"), "<file>:N"),
    (re.compile(r"\s+"), " "),
]


def normalize_message(message: str, limit: int = 300) -> str:
    """Scrub run-specific details from an error message so that it can be compared."""
    lines = [ln for ln in message.strip().splitlines() if ln.strip()]
    # The first line names the error; generated-code dumps and hints follow it.
    text = lines[0] if lines else ""
    for pattern, repl in SCRUBS:
        text = pattern.sub(repl, text)
    return text.strip()[:limit]


def scrub_guards(reasons: list[str]) -> list[str]:
    """Guard failure reasons ("0/1: act == 'tanh'  # h = getattr(torch, act)(h)  # m.py:19
    in forward") scrubbed like a message, without the source comment: which guard
    failed, not the sizes of this run nor where its source line sits."""
    out = []
    for text in reasons:  # a reason's first line; a user stack trace may follow it
        line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
        line = re.split(r"\s+#\s", line, maxsplit=1)[0]
        for pattern, repl in SCRUBS:
            line = pattern.sub(repl, line)
        if line.strip():
            out.append(line.strip())
    return out


def guard_failures(message: str, scrub: bool = True) -> list[str]:
    """The guard failures a recompilation error lists ("triggered by the following guard
    failure(s): - 0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"),
    scrubbed (``scrub_guards``) unless ``scrub`` is False."""
    lines = message.splitlines()
    start = next((i for i, ln in enumerate(lines) if "guard failure" in ln), None)
    if start is None:
        return []
    out = []
    for ln in lines[start + 1 :]:
        ln = ln.strip()
        if not ln.startswith("- "):
            break
        out.append(ln[2:].strip())
    return scrub_guards(out) if scrub else out


def innermost_frame(exc: BaseException) -> str:
    """``file:line in function`` of the innermost frame of ``exc`` that is not
    tcompile's own (known by its modules' folders, owners.py: never by a word in a
    path, so a program or a torch under a folder named ``tcompile`` keeps its frames)."""
    from .owners import is_tcompile

    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    for fs in reversed(frames):
        if not is_tcompile(fs.filename):
            return f"{_short_path(fs.filename.replace(chr(92), '/'))}:{fs.lineno} in {fs.name}"
    return ""


def _short_path(path: str) -> str:
    """An installed module by its place in its installation (``torch/_inductor/ir.py``:
    owners.py decides, not a word in the path), anything else by its file name."""
    from .owners import installed_relative

    return installed_relative(path) or path.rsplit("/", 1)[-1]


def root_cause(exc: BaseException) -> BaseException:
    """Follow torch's wrapper exceptions down to the error that was actually raised.

    ``BackendCompilerFailed`` and ``InductorError`` wrap the real exception in
    ``inner_exception`` / ``__cause__``; the signature is that of the real one.
    """
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "inner_exception", None) or getattr(exc, "real_exception", None)
        if isinstance(inner, BaseException):
            exc = inner
            continue
        if type(exc).__name__ in {"BackendCompilerFailed", "InductorError"} and exc.__cause__:
            exc = exc.__cause__
            continue
        break
    return exc


# CUDA errors after which the process's CUDA context is unusable (they are "sticky":
# every later CUDA call fails too).  A kernel that raises one is a crash, not a
# runtime error: nothing, not even eager, can run in that process afterwards.
CUDA_FATAL = (
    "illegal memory access",
    "operation not supported on global/shared address space",  # an address out of range
    "device-side assert triggered",
    "unspecified launch failure",
    "misaligned address",
    "illegal instruction",
    "hardware stack error",
    "uncorrectable ECC error",
)


def cuda_fatal_message(exc: BaseException) -> str:
    """The first line naming a sticky CUDA error in ``exc`` or its causes, else ''."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for line in str(e).splitlines():
            if any(p in line for p in CUDA_FATAL):
                return line.strip()
        inner = getattr(e, "inner_exception", None)
        e = inner if isinstance(inner, BaseException) else (e.__cause__ or e.__context__)
    return ""


@dataclasses.dataclass(frozen=True)
class FailureSignature:
    stage: str
    kind: str
    exc_type: str
    message: str
    frame: str = ""
    # the program's own source line the failure left it from (a program-level failure:
    # its identity while a minifier shrinks the values its message shows)
    line: str = ""
    # a recompilation failure: the guards that failed (scrubbed, scrub_guards)
    guards: tuple[str, ...] = ()
    # an accuracy failure: which of the graph's results differs (``output``, ``grad``,
    # ``input``: accuracy.accuracy_signature); what a repro compares, as data
    result: str = ""

    def matches(
        self, other: FailureSignature | None, *, any_stage: bool = False, as_exception: bool = False
    ) -> bool:
        """The one "same failure?" rule; ``self`` is the failure being kept (the target).

        * The exception type agrees.  For a crash or a timeout that is the identity (what
          a dying process manages to print is not reliable: threads race to say
          "terminate called ...").
        * A graph's failure: kind, stage (unless ``any_stage``: bisect asks whether the
          failure shows *whatever* stage compiles the graph) and normalised message agree.
        * ``as_exception``: the error as the program dies of it, stage and kind aside (a
          run without torch.compile raises it as a plain exception; a program-level
          minify's candidate may raise it elsewhere): the same raising line of the
          program, or the same normalised message (an empty message -- a bare ``assert``
          -- says nothing: then the raising line must agree).
        * A recompilation failure (the target names ``guards``): the same guards fail."""
        if other is None or self.exc_type != other.exc_type:
            return False
        if self.guards and tuple(other.guards) != tuple(self.guards):
            return False
        fatal = (FailureKind.CRASH.value, FailureKind.TIMEOUT.value)
        if as_exception:
            if self.kind in fatal or other.kind in fatal:
                return self.kind == other.kind
            if self.line and self.line == other.line:
                return True
            return self.message == other.message and (bool(self.message) or not self.line)
        same = self.kind == other.kind and (any_stage or self.stage == other.stage)
        if self.kind in fatal:
            return same
        return same and self.message == other.message

    def __str__(self) -> str:
        text = f"{self.stage}/{self.kind}: {self.exc_type}"
        if self.message:
            text += f": {self.message}"
        return text

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["guards"] = list(self.guards)
        return out

    @classmethod
    def parse(cls, text: str | None) -> FailureSignature | None:
        """``stage/kind: ExcType[: message]`` (``str()``'s form, the one a repro prints
        after REPRODUCED) back into the record; None: not that form.  The one reader of
        a signature's text: what travels as text (a page, a repro's output, an older
        JSON) is read here, never split elsewhere."""
        head, sep, rest = (text or "").partition(": ")
        stage, slash, kind = head.partition("/")
        if not sep or not slash:
            return None
        exc_type, _, message = rest.partition(": ")
        # an accuracy failure's result: ``forward grad differs ...`` (accuracy_signature)
        words = message.split()
        result = words[1] if kind == FailureKind.ACCURACY.value and len(words) > 2 else ""
        return cls(stage, kind, exc_type, message, result=result)

    @property
    def strict(self) -> bool:
        """A wrong value judged by the strict check (its own exception type)."""
        return self.exc_type == "StrictAccuracyError"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FailureSignature:
        fields = {f.name: data.get(f.name) or "" for f in dataclasses.fields(cls)}
        fields["guards"] = tuple(data.get("guards") or ())
        return cls(**fields)

    @classmethod
    def from_exception(
        cls, stage: str, kind: FailureKind | str, exc: BaseException
    ) -> FailureSignature:
        fatal = cuda_fatal_message(exc)
        if fatal and str(getattr(kind, "value", kind)) != FailureKind.CAPTURE.value:
            return cls(
                stage=stage,
                kind=FailureKind.CRASH.value,
                exc_type="CUDAError",
                message=normalize_message(fatal),
                frame=innermost_frame(root_cause(exc)),
            )
        real = root_cause(exc)
        return cls(
            stage=stage,
            kind=str(getattr(kind, "value", kind)),
            exc_type=qualified_type(real),
            message=normalize_message(str(real)),
            frame=innermost_frame(real),
        )


def missing_error(stage: str, eager_error: BaseException) -> FailureSignature:
    """The signature of a graph that returned where eager raised ``eager_error``: the
    error that should have been raised is its identity."""
    real = root_cause(eager_error)
    return FailureSignature(
        stage=stage,
        kind=FailureKind.MISSING_ERROR.value,
        exc_type=qualified_type(real),
        message=normalize_message(str(real)),
        frame=innermost_frame(real),
    )


def qualified_type(exc: BaseException) -> str:
    t = type(exc)
    mod = t.__module__
    if mod in ("builtins", "__main__"):
        return t.__name__
    # keep the last two components: torch._inductor.exc.CppCompileError -> exc.CppCompileError
    return ".".join(mod.split(".")[-1:] + [t.__name__])


def first_lines(text: str, n: int = 3, width: int = 160) -> str:
    lines = [ln.rstrip() for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(ln[:width] for ln in lines[:n])
