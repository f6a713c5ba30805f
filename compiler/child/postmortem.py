"""Judging each graph's last call when the program dies of its own check (issue 61).

A program that asserts on a value its compiled graphs computed (a loss, a metric, a
final comparison) dies outside any graph.  Before, tcompile then ran the program twice
more: without torch.compile (does it fail so anyway?) and once with every graph
checked (which graph computed the wrong value?).  A long job paid three runs.

Now the classification run keeps each graph's most recent call -- an exact snapshot of
its inputs (snapshot.py), taken before the call, as the accuracy check takes one --
within a memory budget (``BUDGET_SHARE`` of the memory available when the graph is
first called, host and device alike; ``TCOMPILE_KEEP_MB`` sets it) and a share of its
time (``TIME_SHARE``: a graph called every millisecond keeps a call at most a few
milliseconds older than its last, and a graph called rarely, its last; a checked call
too).  When the program dies of an uncaught exception outside every graph, each kept
graph is judged on fresh copies of its inputs: the compiled graph called again, eager
and float64 as the check runs them (observe.Watch).  A graph whose values differ is an accuracy failure of that
graph, said with the note that it was judged after the program died; the parent then
needs neither the plain run nor the locating run.  Where no graph differs, nothing is
said and those runs decide, as before.

Not kept, and said once per graph: a graph with random ops (its compiled code draws
other numbers than eager: only fallback_random makes them comparable, which is a change
of the program), a graph with collectives (re-running it on one rank alone would hang
the others), and a call whose inputs do not fit the budget.  Forward values only: a
gradient is judged by ``run --accuracy`` and the locating run -- except where the program
died of autograd refusing what a compiled backward returned (a gradient of the wrong
shape, #178080: raised after the backward graph returned, outside every graph): then
each kept call is run again forward and backward, and the graph whose compiled backward
is refused where eager's is not is the failure's (``_refused``), saved for bisect.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import torch

from .. import accuracy
from ..signature import FailureKind
from ..snapshot import Snapshot

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .runners import GraphRunner
    from .session import Session

BUDGET_SHARE = 0.1  # of the memory available at the first keep
KEEP_ENV = "TCOMPILE_KEEP_MB"
# of the program's time the copies may take: a graph called faster than its copy's cost
# allows keeps the most recent call at most cost / TIME_SHARE old (a training step's
# parameters: every few steps, not every step); a graph called rarely, every call
TIME_SHARE = 0.02
CUDA_BYTES_PER_S = 2e11  # a copy on the GPU runs after the host returns: its bytes' time


def _available(device: str) -> int:
    """Bytes free for copies on ``device`` (host: MemAvailable; CUDA: free memory)."""
    if device.startswith("cuda"):
        try:
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
        except Exception:
            return 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 30


def _bytes(args: Sequence[object]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in args:
        if isinstance(x, torch.Tensor):
            key = str(x.device)
            out[key] = out.get(key, 0) + x.untyped_storage().nbytes()
    return out


class LastCalls:
    """Each graph's last call's inputs, within a budget per device."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.kept: dict[int, tuple[GraphRunner, Snapshot, dict[str, int]]] = {}
        self.budget: dict[str, int] = {}
        self.skipped: dict[int, str] = {}  # graph -> why its calls are not kept
        self.checked: set[int] = set()  # graphs whose kind was looked at (once each)
        self.next_at: dict[int, float] = {}  # graph -> when its next call may be kept
        self.judging = False

    def _limit(self, device: str) -> int:
        if device not in self.budget:
            mb = os.environ.get(KEEP_ENV)
            self.budget[device] = (
                int(float(mb) * 2**20) if mb else int(_available(device) * BUDGET_SHARE)
            )
        return self.budget[device]

    def keep(self, runner: GraphRunner, args: list[object]) -> None:
        """Before the program's call: its inputs, replacing the graph's last ones."""
        index = runner.index
        if index in self.skipped or self.judging:
            return
        if index not in self.checked:
            self.checked.add(index)
            if runner.collective:
                self.skipped[index] = "it holds collectives"
            elif accuracy.has_random_ops(runner.reference):
                self.skipped[index] = "it draws random numbers (compiled code draws others)"
            if index in self.skipped:
                return
        now = time.perf_counter()
        if index in self.kept and now < self.next_at.get(index, 0.0):
            return  # the call kept a moment ago stands for this one (TIME_SHARE)
        previous = self.kept.pop(index, None)  # its previous call's copy goes first
        need = _bytes(args)
        used: dict[str, int] = {}
        for _, _, sizes in self.kept.values():
            for dev, n in sizes.items():
                used[dev] = used.get(dev, 0) + n
        over = [d for d, n in need.items() if used.get(d, 0) + n > self._limit(d)]
        if over:
            self.skipped[index] = (
                f"its inputs ({sum(need.values()) / 2**20:.0f} MiB) did not fit the budget "
                f"of copies ({self._limit(over[0]) / 2**20:.0f} MiB on {over[0]}; "
                f"{KEEP_ENV} sets it)"
            )
            return
        try:
            # into the previous copy's memory where the same storages come again
            self.kept[index] = (runner, Snapshot(args, previous[1] if previous else None), need)
            cost = time.perf_counter() - now
            cost += sum(n for d, n in need.items() if d.startswith("cuda")) / CUDA_BYTES_PER_S
            self.next_at[index] = now + cost / TIME_SHARE
        except Exception as exc:  # a tensor a snapshot cannot copy: never the program's
            self.skipped[index] = f"its inputs could not be copied ({type(exc).__name__})"

    def judge(self, died_of: BaseException | None = None) -> int:
        """The program died of its own exception: judge each kept graph's last call
        (and say which graphs were not kept, and why).  The number found wrong.  Where
        it died of autograd refusing a compiled backward's output, the gradients too
        (``_refused``)."""
        from .observe import Watch

        self.judging = True
        for index, why in sorted(self.skipped.items()):
            self.session.note(
                index,
                f"not judged after the program died of its own exception: {why}; the "
                "locating run checks it",
            )
        wrong = 0
        for index, (runner, snap, _) in sorted(self.kept.items()):
            if runner.quarantined:
                continue
            try:
                args, _ = snap.materialize(grads=False)
                watch = Watch(runner, args)
                with torch.no_grad():
                    out = runner.compiled(*args)
                before = self.session.failures_said
                watch.forward(out, args)
                if self.session.failures_said == before and refused(died_of):
                    wrong += self._refused(index, runner, snap)
                elif self.session.failures_said > before:
                    wrong += 1
                    self.session.note(
                        index,
                        "its values were judged after the program died of its own exception "
                        "outside every graph: its last call, run again compiled and eagerly "
                        "on copies of its inputs, differs (no run without torch.compile was "
                        "needed)",
                    )
            except Exception as exc:  # the judgement, never the program's exit
                self.session.note(
                    index,
                    f"its last call could not be judged after the program died "
                    f"({type(exc).__name__}: {str(exc)[:200]})",
                )
        self.kept.clear()
        return wrong

    def _refused(self, index: int, runner: GraphRunner, snap: Snapshot) -> int:
        """The program died of autograd refusing what a compiled backward returned (a
        gradient of another shape than its input's, #178080): the error is raised after
        the backward graph returned, outside every graph.  This graph's last call run
        again compiled, forward and backward: refused so where eager's is not, the
        failure is this graph's backward (saved with that call's inputs: bisect and
        minify start from it)."""
        try:
            with torch.enable_grad():
                accuracy.run_with_grads(runner.compiled, snap)
            return 0
        except Exception as exc:
            if not refused(exc):
                return 0
            error = exc
        try:
            with torch.enable_grad():
                accuracy.run_with_grads(runner.reference, snap)
        except Exception:
            return 0  # eager's backward fails too: not this graph's
        self.session.failure(graph=index, graph_kind="backward", kind=FailureKind.RUNTIME,
                             stage=runner.stage, exc=error)  # fmt: skip
        runner.capture_pending(snap.values())
        self.session.note(
            index,
            "its backward was judged after the program died of autograd refusing a compiled "
            "backward's gradient: its last call, run again compiled (forward and backward) "
            "and eagerly on copies of its inputs, is refused so compiled only",
        )
        return 1


# autograd's words (engine.cpp, validate_outputs) when a backward returns a gradient of
# another shape, dtype or device than its input's, naming AOTAutograd's function
_REFUSED = "CompiledFunctionBackward returned an invalid gradient"


def refused(exc: BaseException | None) -> bool:
    return exc is not None and _REFUSED in str(exc)
