"""Start-up hooks for the processes tcompile runs (DESIGN.md mechanism 1).

``bootstrap/sitecustomize.py`` calls :func:`install_from_environment` at interpreter
start-up.  It is idempotent, does nothing unless ``TCOMPILE_CONFIG`` is set, and
imports nothing heavy: ``torch.compile`` is patched by a post-import hook the moment
the program imports torch, so a program that never imports torch pays nothing.

What is patched: ``torch.compile`` (which ``nn.Module.compile`` and the decorator form
go through), so that every call gets a :class:`~tcompile.compiler.child.backend.TcompileBackend`
holding the user's backend, mode and options.  ``sys.excepthook`` is chained to record
the exception a program dies of (a capture failure under ``fullgraph=True`` surfaces
that way).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Any, cast

from ..protocol import CONFIG_ENV, Event, HookConfig
from ..signature import FailureSignature, first_lines
from . import exits
from .recorder import Recorder

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType, TracebackType

    from .backend import TcompileBackend
    from .session import Session

_installed = False
# the process's Session, made by session() (typed loosely: see the atexit lambda below)
_session: Any = None


def install_from_environment() -> bool:
    global _installed
    text = os.environ.get(CONFIG_ENV)
    if not text or _installed:
        return False
    try:
        config = HookConfig.from_env(text)
    except (ValueError, TypeError) as exc:
        sys.stderr.write(f"tcompile: ignoring bad {CONFIG_ENV}: {exc}\n")
        return False
    _installed = True
    watch_parent()
    if config.opened:
        from . import opened

        opened.record(config.opened)
    if "torch" in sys.modules:
        _patch_torch(sys.modules["torch"], config)
    else:
        sys.meta_path.insert(0, _TorchImportHook(config))
    _chain_excepthook(config)
    exits.watch(lambda: session().recorder if _config is not None else None)
    return True


def watch_parent() -> None:
    """Exit when tcompile is gone (killed with SIGKILL, say): the user's program, its
    workers and minifier workers must not outlive it, nor keep running on the GPU.
    The parent is named by ``pid:start-time`` (runner.parent_identity), so a pid reused
    by another process does not keep a child alive."""
    import threading

    ident = os.environ.get("TCOMPILE_PARENT", "")
    pid_text, _, start = ident.partition(":")
    if not pid_text.isdigit():
        return
    pid = int(pid_text)

    def alive() -> bool:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except FileNotFoundError:
            return False
        except OSError:
            try:
                os.kill(pid, 0)
                return True
            except ProcessLookupError:
                return False
            except OSError:
                return True
        fields = stat.rsplit(b")", 1)[1].split()
        if fields and fields[0] == b"Z":  # a zombie: dead, not yet reaped
            return False
        return start == "?" or (len(fields) > 19 and fields[19].decode() == start)

    def die() -> None:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)

    if not alive():
        die()
    try:  # Linux 5.3+: a descriptor that becomes readable when that process exits
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None

    def wait_for_exit() -> None:
        # blocks in the kernel until the parent exits: no polling
        import select

        select.select([pidfd], [], [])
        die()

    def poll() -> None:
        import time

        while True:
            time.sleep(0.5)
            if not alive():
                die()

    if pidfd is not None and alive():  # the pid is still the parent's: the fd is its
        threading.Thread(target=wait_for_exit, name="tcompile-parent-watch", daemon=True).start()
    else:
        threading.Thread(target=poll, name="tcompile-parent-watch", daemon=True).start()


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Runs ``_patch_torch`` right after ``import torch`` finishes."""

    def __init__(self, config: HookConfig) -> None:
        self.config = config
        self._busy = False

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "torch" or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        original = loader.exec_module
        config = self.config
        hook = self

        def exec_module(module: ModuleType) -> None:
            original(module)
            if hook in sys.meta_path:
                sys.meta_path.remove(hook)
            _patch_torch(module, config)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def session() -> Session:
    global _session
    if _session is None:
        from .session import Session

        _session = Session(cast("HookConfig", _config))  # (set when torch was patched)
        _private_caches(os.path.join(cast("HookConfig", _config).dir, "compile-cache"))
        import torch

        _session.recorder.emit(
            Event.START, argv=sys.argv, torch=torch.__version__, python=sys.version.split()[0]
        )
    return _session


_config: HookConfig | None = None


def _private_caches(directory: str) -> None:
    """inductor's FX-graph and AOTAutograd caches in a directory of this run's own:
    cold at start (nothing built under other settings is served), and within the run
    they serve what they served in the program (a bug of those caches still shows)."""
    try:
        from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache
        from torch._inductor.codecache import FxGraphCache
    except ImportError:
        return
    fx, aot = os.path.join(directory, "fxgraph"), os.path.join(directory, "aotautograd")
    FxGraphCache._get_tmp_dir = staticmethod(lambda: fx)  # type: ignore[method-assign]
    AOTAutogradCache._get_tmp_dir = classmethod(lambda cls: aot)  # type: ignore[method-assign]


def _patch_torch(torch: Any, config: HookConfig) -> None:
    global _config
    _config = config
    original = torch.compile
    if getattr(original, "_tcompile_patched", False):
        return

    @functools.wraps(original)
    def compile(model: Callable[..., object] | None = None, **kwargs: Any) -> Callable[..., object]:
        if model is None:
            return lambda m: compile(m, **kwargs)
        if config.disable:
            return model
        from .backend import TcompileBackend

        _watch_nothing_compiled()
        options = kwargs.pop("options", None)
        passthrough = {}
        if isinstance(options, dict):
            options = dict(options)
            for key in ("guard_filter_fn",):  # consumed by torch.compile itself
                if key in options:
                    passthrough[key] = options.pop(key)
        backend = TcompileBackend(
            session(),
            user_backend=kwargs.pop("backend", None) or "inductor",
            mode=kwargs.pop("mode", None),
            options=options,
            dynamic=kwargs.get("dynamic"),
            fullgraph=bool(kwargs.get("fullgraph", False)),
        )
        return _without_bisect_override(original, model, backend, passthrough, kwargs)

    compile._tcompile_patched = True  # type: ignore[attr-defined]
    torch.compile = compile
    if "WORLD_SIZE" in os.environ:
        _patch_destroy_process_group(torch)
    if config.bisect is not None:
        import atexit

        from .subsystems import install

        install(config.bisect)
        # some applications happen at a graph's first call, not at its compile
        # (cudagraphs wraps a graph when it first runs): count them at the end too
        # (only a process that compiled: inductor's compile workers inherit the hooks)
        atexit.register(lambda: _session is not None and _session.emit_counts())
    if config.record != "off" and not config.disable:
        from .frames import install as install_record

        install_record(session)
    if config.explain:
        from .diagnostics import install as install_diagnostics

        install_diagnostics(session().recorder)


_compile_calls = 0


def _watch_nothing_compiled() -> None:
    """A program that calls torch.compile and yet compiles no graph (``torch.compile(
    DDP(model))`` on NCCL: Dynamo skips the wrapped forward) is told so at its exit,
    with Dynamo's own reasons for each frame it skipped (issue 37)."""
    global _compile_calls
    _compile_calls += 1
    if _compile_calls > 1:
        return
    import atexit

    try:  # Dynamo keeps the reasons it skipped frames where this list exists
        from torch._dynamo.eval_frame import dynamo_tls

        if getattr(dynamo_tls, "skip_reasons", None) is None:
            dynamo_tls.skip_reasons = []
    except (ImportError, AttributeError):
        pass
    atexit.register(_say_if_nothing_compiled)


def _say_if_nothing_compiled() -> None:
    try:
        if _session is None or _session.recorder.graphs_seen() or _config is None:
            return
        if exits.raised:  # it died (in Dynamo's tracing, say): its failure says why
            return
        if _config.disable or _config.serve is not None:
            return
        from torch._dynamo.eval_frame import get_skip_reasons

        reasons = list(dict.fromkeys(get_skip_reasons()))[:5]
    except Exception:
        reasons = []
    why = (
        "; ".join(reasons)
        if reasons
        else "Dynamo gave no reason (was the compiled callable ever called?)"
    )
    _session.note(
        None,
        f"torch.compile was called ({_compile_calls} time(s)) but no graph was compiled: "
        f"the program ran eagerly. Dynamo skipped: {why}",
    )


def _patch_destroy_process_group(torch: ModuleType) -> None:
    """Say when a rank has torn its process group down: the program's work is done.
    (gloo's ProcessGroupGloo destructor can deadlock at the program's exit -- it joins
    its threads holding the GIL while one of them needs it to free a finished work;
    the parent ends such a rank once every rank has said this: runner.py.)"""
    dist = getattr(torch, "distributed", None)
    original = getattr(dist, "destroy_process_group", None)
    if original is None or getattr(original, "_tcompile_patched", False):
        return

    @functools.wraps(original)
    def destroy_process_group(*args: object, **kwargs: object) -> object:
        out = original(*args, **kwargs)
        try:
            if not args and kwargs.get("group") is None:  # the default group: the end
                session().recorder.emit(Event.GROUP_DESTROYED)
        except Exception:
            pass
        return out

    destroy_process_group._tcompile_patched = True  # type: ignore[attr-defined]
    dist.destroy_process_group = destroy_process_group


def _without_bisect_override(
    original: Callable[..., Callable[..., object]],
    model: Callable[..., object],
    backend: TcompileBackend,
    passthrough: dict[str, object],
    kwargs: dict[str, object],
) -> Callable[..., object]:
    """torch.compile swaps the backend for $TORCH_BISECT_BACKEND when that is set;
    under tcompile every graph must still go through tcompile's backend."""
    if not os.environ.get("TORCH_BISECT_BACKEND"):
        return original(model, backend=backend, options=passthrough or None, **kwargs)
    from torch._inductor.compiler_bisector import CompilerBisector

    saved = CompilerBisector.__dict__["get_backend"]
    CompilerBisector.get_backend = classmethod(lambda cls: None)  # type: ignore[method-assign]
    try:
        return original(model, backend=backend, options=passthrough or None, **kwargs)
    finally:
        CompilerBisector.get_backend = saved  # type: ignore[method-assign]


def _chain_excepthook(config: HookConfig) -> None:
    previous = sys.excepthook

    def excepthook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        exits.note_raised(exc_type, exc)
        try:
            _record_uncaught(exc)
        except Exception:
            pass
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook


def _record_uncaught(exc: BaseException) -> None:
    if _config is None:  # torch never compiled anything: record without a session
        rec = Recorder(HookConfig.from_env(os.environ[CONFIG_ENV]).dir)
    else:
        rec = session().recorder
    dynamo = False
    user_frame = ""
    record_path = None
    user_stack: list[str] = []
    original = exc
    if "torch" in sys.modules and _config is not None:
        from .session import is_dynamo_exception

        chain: list[BaseException] = []
        e: BaseException | None = exc
        while e is not None and e not in chain:
            chain.append(e)
            e = e.__cause__ or e.__context__
        for e in chain:
            if is_dynamo_exception(e):
                dynamo = True
                exc = e
                stack = getattr(e, "real_stack", None)
                if stack:
                    fs = stack[-1]
                    user_frame = f"{fs.filename}:{fs.lineno} in {fs.name}"
                    user_stack = [f"{f.filename}:{f.lineno} in {f.name}" for f in stack][-8:]
                break
        if dynamo and _config.record != "off":
            from .frames import write_from_exception

            try:
                record_path = write_from_exception(session(), original)
            except Exception as e:  # the report goes on without a record
                rec.emit(Event.NOTE, graph=None, text=f"could not write the frame's record: {e}")
    sig = FailureSignature.from_exception(
        "eager" if dynamo else "script", "capture" if dynamo else "exception", exc
    )
    # the innermost cause: Dynamo wraps the user's own error (a shape mismatch seen
    # while tracing) in TorchRuntimeError; eager raises the bare one
    cause: BaseException = exc
    while cause.__cause__ is not None and cause.__cause__ is not cause:
        cause = cause.__cause__
    cause_sig = FailureSignature.from_exception("script", "exception", cause)
    # A GPU kernel that faults is reported at a later synchronisation, maybe outside
    # any compiled graph: name the last graph that ran (collect() attributes the
    # crash to it, unconfirmed: the plain re-run still decides if it is the program's)
    after: dict[str, object] = {}
    last = getattr(rec, "last_run", None)
    if not dynamo and sig.exc_type == "CUDAError" and _session is not None and last:
        after = {
            "after_graph": last[0],
            "after_graph_kind": last[1],
            "after_stage": _session.graph_stage.get(last[0], "unknown"),
        }
    backward = None
    if not dynamo and _session is not None:
        from .session import backward_graph_of

        backward = backward_graph_of(original)
    if backward is not None and _session is not None:
        # autograd raised while running a compiled graph's backward (a saved tensor
        # modified in place, ...): the failure belongs to that backward graph
        after = {
            "after_graph": backward,
            "after_graph_kind": "backward",
            "after_stage": _session.graph_stage.get(backward, "unknown"),
            "in_backward": True,
        }
    judge = isinstance(original, Exception) and not dynamo and not after  # not Ctrl-C
    if judge and _session is not None and _session.last_calls is not None:
        # the program died of its own exception outside every graph: judge each graph's
        # last call now (postmortem.py) -- a wrong one names the failure
        _session.last_calls.judge(original)
    rec.emit(
        Event.EXCEPTION,
        **after,
        dynamo=dynamo,
        signature=sig.to_json(),
        cause_signature=cause_sig.to_json(),
        signature_text=str(sig),
        user_frame=user_frame,
        # what was raised and the program's own line that raised it (cause.py): "the
        # same failure without torch.compile?" compares these, not messages
        cause=_cause(original),
        # the program's own frames, outermost first: a crash elsewhere is compared with
        # them (cause.died_where_raised)
        stack=_stack(original),
        raised_in=_raised_in(original),
        record=record_path,
        user_stack=user_stack,
        message=first_lines(f"{type(exc).__name__}: {exc}", 12, 400),
        line=_raising_line(original),
    )


def _cause(exc: BaseException) -> dict[str, object] | None:
    from ..cause import Cause

    try:
        return Cause.from_exception(exc).to_json()
    except Exception:  # a cause that cannot be read: the messages decide
        return None


def _raised_in(exc: BaseException) -> str:
    """The file of the innermost frame the error was raised in (any owner's)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename if tb is not None else ""


def _stack(exc: BaseException) -> list[str]:
    from ..cause import user_frames

    try:
        return user_frames(exc)[-32:]
    except Exception:
        return []


def _raising_line(exc: BaseException) -> str:
    """The program's own source line the exception left it from (the innermost frame of
    the program's own code, owners.py): a program's failure keeps its identity while a
    minifier shrinks the values its message shows."""
    import linecache
    import traceback

    from ..owners import is_user

    text = ""
    for fs in traceback.extract_tb(exc.__traceback__):
        if is_user(fs.filename):
            text = (linecache.getline(fs.filename, fs.lineno or 0) or fs.line or "").strip()
    return text[:300]
