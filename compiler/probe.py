"""Probing: run the program once under a configuration and ask whether the failure
being bisected shows; the flat list of inductor toggles and subsystem applications
bisection.py searches, and the search itself."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tcompile.minifier.verdict import Verdict

from .collect import collect, last_counts
from .failure import Failure
from .observer import NullObserver, Observer
from .protocol import Event, HookConfig
from .runner import CANCEL, ProcessResult, run_process
from .signature import FailureKind, FailureSignature
from .stack import OPTIMIZATIONS, SUBSYSTEMS, TOGGLES

if TYPE_CHECKING:
    from .forkserver import ForkPool

SAME = Verdict.SAME_FAILURE

# an accuracy failure's message (accuracy.py): how far off, and what is allowed
_RMSE = re.compile(
    r"RMSE vs float64 (\S+) compiled, (\S+) eager \(allowed (\S+)x eager \+ ([^)\s]+)\)"
)


@dataclasses.dataclass
class Item:
    kind: str  # "toggle" | "application"
    name: str  # config key, or subsystem
    index: int = 0  # application number within its subsystem
    detail: str = ""
    value: object = None  # a toggle's changed value


class Bisector:
    def __init__(
        self,
        command: list[str],
        *,
        accuracy: str,
        timeout: float | None,
        jobs: int,
        run_dir: Path,
        observer: Observer,
    ) -> None:
        self.command = command
        self.accuracy = accuracy
        self.timeout = timeout
        self.jobs = max(1, jobs)
        self.run_dir = run_dir
        self.observer = observer
        self.runs = 0
        self.steps: list[dict[str, Any]] = []
        self.target: FailureSignature | None = None
        self.graphless = False  # the target failure showed outside any compiled graph
        # a configuration asked before: its verdict and what its run said (failures,
        # counts), so an asker that reads them gets them again (not only the verdict)
        self._known: dict[str, tuple[Verdict, dict[str, Any]]] = {}
        self.repeat: int | None = None  # runs per configuration (None: by the failure)
        # a crash or timeout that did not show on a configuration where it showed before:
        # from then on a passing configuration is in doubt and runs up to 3 times
        self.doubt = False
        self.doubtful = True  # in_doubt(): the culprit's boundary is confirmed
        self.guided = True  # guided.py: the first divergent op's applications first
        self.peers: Any = None  # peers.Peers: the other nodes of a job bisecting too
        self._lock = threading.Lock()
        # a launched job whose failure is one rank's: only that rank compiles (bisection)
        self.gate_rank: int | None = None
        # forked probes (forkserver.py): None until the first probe decides (a ForkPool
        # when the program forked fails as the fresh baseline did), then kept or False
        self.fork: ForkPool | Literal[False] | None = None
        self.forked_runs = 0
        self.fork_checked = False  # the one forked run that decides ran
        self._warming: threading.Thread | None = None  # warm_fork: the servers starting
        self._warm: Any = None

    def may_flip(self) -> bool:
        """A failure that may not show on every run (a crash: heap corruption in
        generated code shows in most runs, not all; a timeout)."""
        t = self.target
        return t is not None and t.kind in (FailureKind.CRASH, FailureKind.TIMEOUT)

    def tries_for(self) -> int:
        """How many runs a configuration gets before it counts as passing: ``repeat``
        when stated; else 1, until a crash is seen not to show on every run (``doubt``,
        set by the confirmation in bisection.py): then 3, and the failure counts if it
        shows once.  A crash that fires on every run costs no more runs than an
        accuracy bug."""
        if self.repeat is not None:
            return self.repeat
        return 3 if self.doubt and self.may_flip() else 1

    @staticmethod
    def in_doubt(failure: Failure) -> bool:
        """Does a pass near this failure need a second look (bisection's confirmation
        run)?  Not for a compile-time exception (the same graph fails the same way), a
        dtype or shape mismatch, or values off by more than 100 times what is allowed
        (a false pass would need the error to shrink a hundredfold); yes for a crash,
        a timeout, a runtime error and a wrong value near its tolerance."""
        if failure.kind == FailureKind.COMPILE:
            return False
        if failure.kind != FailureKind.ACCURACY:
            return True
        if failure.signature.exc_type in ("DtypeMismatch", "ShapeMismatch"):
            return False
        m = _RMSE.search(failure.message or "")
        if not m:
            return True
        got, eager, times, floor = (float(x) for x in m.groups())
        return got < 100 * (times * eager + floor)

    def forget_passes(self) -> None:
        """Doubt: passing verdicts so far may be false passes; failing ones stand."""
        self._known = {k: v for k, v in self._known.items() if v[0] is SAME}

    def probe(
        self,
        label: str,
        *,
        stage: str | None = None,
        gate: list[int] | None = None,
        bisect: dict[str, object] | None = None,
        reuse: bool = True,
    ) -> tuple[Verdict, dict[str, Any]]:
        """Run the program under a configuration: does the target failure show
        (``Verdict.SAME_FAILURE``)?  A configuration where it does not show is run
        again, up to ``tries_for()``."""
        key = repr((stage, gate, self.gate_rank, bisect))
        if reuse and key in self._known:
            verdict, info = self._known[key]
            return verdict, {**info, "reused": True}
        tries = self.tries_for()
        for attempt in range(tries):
            verdict, info = self._run_once(label, stage, gate, bisect, attempt, tries)
            if verdict is SAME:
                break
        self._known[key] = (verdict, info)
        return verdict, info

    def _run_once(
        self,
        label: str,
        stage: str | None,
        gate: list[int] | None,
        bisect: dict[str, object] | None,
        attempt: int,
        tries: int,
    ) -> tuple[Verdict, dict[str, Any]]:
        with self._lock:
            self.runs += 1
            n = self.runs
        t = self.target
        assert t is not None
        config = HookConfig(
            dir=str(self.run_dir / f"probe-{n:03d}"),
            stage=stage,
            accuracy=self.accuracy,
            gate=gate,
            gate_rank=self.gate_rank,
            bisect=bisect if bisect is not None else {"limits": {}, "toggles": {}},
            stop_on=t.to_json(),
        )
        t0 = time.monotonic()
        result = self._forked(config)
        if result is None:
            result = run_process(
                self.command,
                config,
                timeout=self.timeout,
                observer=NullObserver(),
                stdout=_Sink(),
                stderr=_Sink(),
            )
        graphs, failures, _ = collect(result)
        hit = [f for f in failures if t.matches(f.signature, any_stage=True)]
        if not hit and self.graphless:
            # a failure that surfaced outside any compiled graph (the baseline showed it
            # is not the program's own: it passes without torch.compile): the program
            # dying of the same exception is the failure showing
            last = [e for e in result.events if e.get("event") == Event.EXCEPTION]
            if last:
                s = FailureSignature.from_json(last[-1].get("signature") or {})
                if t.matches(s, as_exception=True):
                    hit = [Failure(graph=None, graph_kind="dynamo", signature=s)]
        counts = last_counts(result.events)
        if self.peers is not None:  # the failure may show on another node's rank
            shared = self.peers.share(
                f"probe-{n:03d}", {"hit": [f.to_json() for f in hit], "counts": counts}
            )
            hit = [Failure.from_json(f) for d in shared for f in d["hit"]]
            counts = next((d["counts"] for d in shared if d["hit"] and d["counts"]), counts)
        verdict = SAME if hit else _verdict_of(result, failures)
        step = {
            "run": n,
            "what": label + (f" (try {attempt + 1} of {tries})" if attempt else ""),
            "failed": verdict is SAME,
            "verdict": verdict.value,
            "seconds": round(time.monotonic() - t0, 2),
            "graph": hit[0].graph if hit else None,
        }
        if verdict is Verdict.OTHER_FAILURE:  # what the program failed of instead
            step["other"] = _other(result, failures)
        self.steps.append(step)
        self.observer.event({"event": Event.BISECT_STEP, **step})
        return verdict, {"failures": hit, "graphs": graphs, "counts": counts}

    def _script(self) -> tuple[str, list[str]] | None:
        """(script, argv) of ``python SCRIPT ARGS`` (the only command a probe may fork)."""
        import os
        import sys

        c = self.command
        if len(c) < 2 or os.path.realpath(c[0]) != os.path.realpath(sys.executable):
            return None
        if not c[1].endswith(".py") or not os.path.isfile(c[1]):
            return None
        return os.path.abspath(c[1]), c[2:]

    def _forked(self, config: HookConfig) -> ProcessResult | None:
        """A probe forked from a server that imported torch (forkserver.py), or None: a
        fresh run.  Decided at the first probe: a single-process ``python SCRIPT`` whose
        unchanged configuration, forked, shows the target failure as the fresh baseline
        did (one forked run); else never.  TCOMPILE_NO_FORK=1: never."""
        self._decide_fork()
        if not self.fork:
            return None
        result = self._fork_run(self.fork, config)
        with self._lock:
            if result is None:  # the server is gone: fresh runs from now on
                self.fork.close()
                self.fork = False
            else:
                self.forked_runs += 1
        return result

    def _fork_run(self, pool: ForkPool, config: HookConfig) -> ProcessResult | None:
        import os

        script, argv = self._script()  # type: ignore[misc]
        try:
            return pool.run(
                script,
                argv,
                config,
                timeout=self.timeout or 3600.0,
                cwd=os.getcwd(),
                extra_path=[os.path.dirname(script)],
            )
        except (RuntimeError, OSError):  # the server gone (closed under it: a broken pipe)
            return None

    def _start_fork(self) -> ForkPool | None:
        """The warm servers (warm_fork), when one forked run of the program's own
        configuration shows the target failure."""
        pool = self._pool()
        if pool is None:
            return None
        if self.target is None or self.graphless:
            pool.close()
            return None
        config = HookConfig(
            dir=str(self.run_dir / "fork-check"),
            accuracy=self.accuracy,
            bisect={"limits": {}, "toggles": {}},
            stop_on=self.target.to_json(),
        )
        result = self._fork_run(pool, config)
        self.fork_checked = result is not None
        hits = collect(result)[1] if result is not None else []
        if not any(self.target.matches(f.signature, any_stage=True) for f in hits):
            pool.close()
            return None
        return pool

    def warm_fork(self) -> None:
        """Start the fork servers now, while the baseline runs (their imports overlap
        it); the first probe decides whether they are used.  Never for a command other
        than ``python SCRIPT``, nodes bisecting together (--peers), a rank of a job, or
        a run with torch's trace (read at import)."""
        import os

        if self._warming is not None:  # started already
            return
        if os.environ.get("TCOMPILE_NO_FORK") == "1" or self._script() is None:
            return
        if self.peers is not None or any(k in os.environ for k in ("WORLD_SIZE", "TORCH_TRACE")):
            return

        def start() -> None:
            from .forkserver import ForkPool

            try:
                self._warm = ForkPool(self.jobs)
            except (RuntimeError, OSError):
                self._warm = None

        self._warming = threading.Thread(target=start, daemon=True)
        self._warming.start()

    def decide_fork_aside(self) -> None:
        """Decide now, in a thread beside the caller's own work, whether probes fork
        (``_start_fork``'s one forked run), so that a later probe finds it decided: the
        capture bisect's confirmation is then one forked run, and the check ran while
        the captured graph was judged (issue 61: a small program no slower for its
        capture).  A probe asked meanwhile waits for the answer (the lock)."""
        if self._warming is None:
            return

        threading.Thread(target=self._decide_fork, daemon=True).start()

    def _decide_fork(self) -> None:
        with self._lock:
            if self.fork is None:
                self.fork = self._start_fork() or False

    def _pool(self) -> ForkPool | None:
        if self._warming is None:
            return None
        self._warming.join()
        return self._warm

    def close(self) -> None:
        if self.fork:
            self.fork.close()
        elif self._pool() is not None:
            self._warm.close()
        self.fork = False

    def probe_many(self, specs: list[tuple[str, dict[str, Any]]]) -> list[Verdict]:
        if self.jobs == 1 or len(specs) == 1:
            return [self.probe(label, **kw)[0] for label, kw in specs]
        pool = ThreadPoolExecutor(self.jobs)
        try:
            return list(pool.map(lambda s: self.probe(s[0], **s[1])[0], specs))
        except KeyboardInterrupt:
            CANCEL.set()  # the runs in other threads stop too (runner.run_process)
            raise
        finally:
            pool.shutdown(wait=True)


def _verdict_of(result: ProcessResult, failures: list[Failure]) -> Verdict:
    """A probe whose target failure did not show: what it showed instead."""
    if result.timed_out:
        return Verdict.TIMEOUT
    if result.returncode is not None and result.returncode < 0:
        return Verdict.CRASH  # a signal (and not the target's: that would have matched)
    if failures or result.returncode:
        return Verdict.OTHER_FAILURE
    return Verdict.PASS


def _other(result: ProcessResult, failures: list[Failure]) -> str:
    """A probe's failure that is not the target's, in words."""
    if failures:
        f = failures[0]
        where = "outside any graph" if f.graph is None else f"graph {f.graph}"
        return f"{where}: {f.signature}"
    return f"the program exited {result.returncode}"


class _Sink:
    def write(self, _: str) -> int:
        return 0

    def flush(self) -> None:
        pass


def optimization_items(stage: str) -> list[Item]:
    """``OPTIMIZATIONS`` this torch has, as toggles (an older torch lacks some)."""
    import torch._inductor.config as inductor_config

    from .configs import MISSING, get_dotted

    return [
        Item("toggle", k, value=v)
        for k, v in OPTIMIZATIONS.get(stage, {}).items()
        if get_dotted(inductor_config, k) is not MISSING
    ]


def items_of(stage: str, counts: dict[str, list[str]]) -> list[Item]:
    items = [Item("toggle", k, value=v) for k, v in TOGGLES.get(stage, {}).items()]
    for sub in SUBSYSTEMS.get(stage, []):
        for i, detail in enumerate(counts.get(sub, [])):
            items.append(Item("application", sub, i, detail))
    return items


def prefix_config(stage: str, items: list[Item], k: int) -> dict[str, object]:
    """Enable items[:k]; disable the rest (toggles changed, applications skipped).
    A subsystem whose applications are all enabled gets no limit at all."""
    limits: dict[str, int] = {}
    toggles: dict[str, object] = {}
    for i, it in enumerate(items):
        if it.kind == "toggle":
            if i >= k:
                toggles[it.name] = it.value
        elif i >= k and it.name not in limits:
            limits[it.name] = it.index  # its applications before this one stay enabled
    return {"limits": limits, "toggles": toggles}


def enable_label(items: list[Item], p: int) -> str:
    """A step of the prefix search, in words: ``enable 3 of 30 (lowerings #1 relu)``
    (both searches, program and capture; bisect_report.turned reads it back)."""
    return f"enable {p} of {len(items)} ({describe(items[p - 1]) if p else 'none'})"


def describe(item: Item) -> str:
    if item.kind == "toggle":
        return f"{item.name}"
    return f"{item.name} #{item.index} {item.detail[:60]}"


def off_config(off: list[Item]) -> dict[str, Any]:
    """These applications (and toggles) off in the graph's compile, all else on."""
    return merge_off({"limits": {}, "toggles": {}}, off)


def merge_off(cfg: dict[str, Any], off: list[Item]) -> dict[str, Any]:
    skip: dict[str, list[int]] = {}
    toggles = dict(cfg.get("toggles") or {})
    for it in off:
        if it.kind == "toggle":
            toggles[it.name] = it.value
        else:
            skip.setdefault(it.name, []).append(it.index)
    return {**cfg, "toggles": toggles, "skip": skip}
