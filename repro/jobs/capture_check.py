"""Membership on the captured graph (issue 62): does a culprit's switch, turned off, make
a script's failure go away -- asked of the failing graph its ``run --capture`` saved,
one or two compiles, the program not run again.

Judgements in one worker (capture_bisect.py's worker: it serves the saved graph with
its failing call's inputs), at the culprit's stage (``--backend``: a decomposition's
culprit is judged where it applies):

1. the graph with the switch off (``stack.without``'s configuration, the words of
   ``run --without``): it must pass -- where it fails (the same way or another), the
   answer is ``no``, from one compile;
2. where it passed, the graph as it is: the script's failure must show.  That is the
   script's second sample, as a second run of it was, and what ties the failure to
   this graph: a pass there says nothing of the switch.

``member``: 1 passed and 2 showed the failure.  ``no``: 1 failed.  ``unknown``: no
answer here -- the graph does not fail alone (the failure needs the program around
it), or a judgement ran out of time twice or lost its worker (issue 64: timing never
decides an answer).  Triage checks an unknown by running the
program (triage_one.check_one).

Several representatives' switches are asked in one worker (``--try``, in the order
given, each alone; it stops at the first ``member`` or ``unknown``): a worker's start
and its first compile are most of a check (2.3 + 4.3 s against 0.9 s for each later
judgement of argreduce #193751's graph), and a script proposed three
representatives paid them three times.

    python -m tcompile.repro.jobs.capture_check RUN_DIR --without W [--without W]
        [--backend STAGE]
    python -m tcompile.repro.jobs.capture_check RUN_DIR --try "W [W]"[@STAGE] ...
    python -m tcompile.repro.jobs.capture_check --serve WORK_DIR   (serve(): a line each)

prints one JSON document (``answer``, ``unchanged``, ``off``, ``why``, ``seconds``,
``capture``; with ``--try``: ``answers``, one per switch asked, each with ``without``,
``backend``, ``answer``, ``off``, ``why``, ``seconds``) and exits 0; 4 when tcompile
itself failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcompile.compiler import layout
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.failure import Failure
from tcompile.compiler.stack import without as switch_config
from tcompile.minifier.verdict import Verdict

from .capture_bisect import capture_of, capture_pool
from .run_record import RunReport

if TYPE_CHECKING:
    import torch

    from tcompile.compiler.pool import WorkerPool

MEMBER, NO, UNKNOWN = "member", "no", "unknown"
_UNFINISHED = (Verdict.TIMEOUT, Verdict.CRASH)


def captured_failure(run_dir: str) -> tuple[RunReport, Failure, Path | None, str]:
    """A ``run --capture``'s first failure (the one triage classified the script by),
    its saved graph's folder, or None and why there is none."""
    base = RunReport.from_json(json.loads((Path(run_dir) / layout.RESULT).read_text()))
    if not base.failures:
        return base, Failure.from_json({}), None, "the run found no failure"
    first = base.failures[0]
    cap, why = capture_of(run_dir, first)
    return base, first, cap, why


Try = tuple[list[str], str | None]  # a switch's words, the stage it is judged at


def check(run_dir: str, words: list[str], backend: str | None) -> dict[str, Any]:
    """One switch (``--without``): the two judgements above, flat."""
    doc = check_many(run_dir, [(words, backend)])
    answers = doc.pop("answers")
    first = answers[0] if answers else {"answer": UNKNOWN, "off": None}
    doc.update({k: first.get(k) for k in ("answer", "off")})
    doc["why"] = first.get("why") or doc.get("why") or ""
    return doc


class Held:
    """A check server's worker, kept from one check to the next (check_server.py): the
    start of an interpreter, of a worker and its first compile are most of a check
    (2.3 + 4.3 s, against 0.9 s a judgement); a worker judges another script's capture
    when told its failure (serve.py's ``retarget``)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.pool: WorkerPool | None = None
        self.made = 0  # pools started, each in its own folder

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.pool = None


def _plain(meta: dict[str, Any]) -> bool:
    """A capture whose worker holds nothing of its own beyond what ``retarget`` sets:
    no configuration, backend source, autocast or collectives."""
    keys = ("config", "backend_source", "autocast", "collectives")
    return not any(meta.get(k) for k in keys) and meta.get("level", "dynamo") == "dynamo"


def check_many(run_dir: str, tries: list[Try], held: Held | None = None) -> dict[str, Any]:
    """Each switch in ``tries``, in order, on one worker: an answer for each asked (the
    first to answer ``member`` or ``unknown`` is the last asked); ``why`` where the
    capture gives no answer at all.  ``held``: a server's worker, used and kept where
    the capture is plain (_plain)."""
    from .minify_search import read_capture

    t0 = time.monotonic()
    base, target, cap, why = captured_failure(run_dir)
    out: dict[str, Any] = {"answers": [], "unchanged": None, "why": why}
    out["capture"] = str(cap) if cap else None
    if cap is None or not base.captured:
        out["why"] = why or "the run was not made with --capture"
        out["answers"] = [_answer(w, b, UNKNOWN, None, out["why"]) for w, b in tries[:1]]
        return out
    meta = json.loads((cap / layout.CAPTURE_META).read_text())
    keep = held is not None and _plain(meta)
    extra: dict[str, Any] = {}
    if keep:
        extra["retarget"] = {**meta, "signature": target.signature.to_json()}
        extra["retarget"]["accuracy"] = base.accuracy
    pool = held.pool if held is not None and keep else None
    if held is not None and pool is None:
        held.close()  # not plain, or none yet: a fresh worker, bound to this capture
    starting = ThreadPoolExecutor(1)
    try:
        if pool is None:
            if held is not None:
                held.made += 1
                work = held.work / f"pool-{held.made}"
            else:
                work = Path(run_dir) / "capture-checks" / f"{time.time_ns()}"
            pool, _ = capture_pool(cap, meta, target, base.accuracy, base.command, work, jobs=1)
            ready = starting.submit(pool.start)  # the worker imports torch while this reads
            gm, inputs, _ = read_capture(cap)
            ready.result()
        else:
            pool.retarget(target.signature)
            gm, inputs, _ = read_capture(cap)
        if keep and held is not None:
            held.pool = pool
        _judge_all(out, pool, gm, inputs, tries, t0, extra)
    except BaseException:
        if held is not None:
            held.close()
        raise
    finally:
        starting.shutdown()
        if not keep and pool is not None:
            pool.close()
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


def _answer(
    words: list[str], backend: str | None, answer: str, off: str | None, why: str
) -> dict[str, Any]:
    return {"without": " ".join(words), "backend": backend, "answer": answer, "off": off,
            "why": why}  # fmt: skip


def _judge_all(
    out: dict[str, Any],
    pool: WorkerPool,
    gm: torch.fx.GraphModule,
    inputs: list[object],
    tries: list[Try],
    t0: float,
    extra: dict[str, Any],
) -> None:
    """The switch off first: the failure still showing is a ``no`` from one compile (the
    graph fails alone with it off); a pass must then be checked against the graph as
    it is, which must fail -- else the pass says nothing of the switch.  The graph as it
    is is judged once per stage, whichever switch asks first."""
    unchanged: dict[str | None, Verdict] = {}
    since = t0  # the worker's start is the first answer's
    for words, backend in tries:
        stage = {**extra, "stage": backend} if backend else dict(extra)
        off, _ = pool.evaluate(gm, inputs, request={**stage, "bisect": switch_config(words)})
        a = _answer(words, backend, UNKNOWN, off.value, "")
        out["answers"].append(a)
        if off in _UNFINISHED:
            a["why"] = f"judging the graph with the switch off ended {off.value}"
        elif off is not Verdict.PASS:
            a["answer"], a["why"] = NO, f"with the switch off it ends {off.value}"
        else:
            if backend not in unchanged:
                asked: dict[str, Any] = {"limits": {}, "toggles": {}}
                unchanged[backend], _ = pool.evaluate(
                    gm, inputs, request={**stage, "bisect": asked}
                )
            now = unchanged[backend]
            out["unchanged"] = now.value
            if now is Verdict.SAME_FAILURE:
                a["answer"] = MEMBER
            elif now in _UNFINISHED:
                a["why"] = f"judging the captured graph ended {now.value}"
            else:
                a["why"] = f"the captured graph does not fail alone ({now.value})"
        a["seconds"] = round(time.monotonic() - since, 2)
        since = time.monotonic()
        if a["answer"] != NO:
            return  # a member: the rest not asked; unknown: the capture does not answer


def _parse_try(text: str) -> Try:
    words, _, stage = text.partition("@")
    return words.split(), stage or None


def _failed(exc: BaseException) -> dict[str, Any]:
    """tcompile's own failure: said, never an answer."""
    doc = {"answer": UNKNOWN, "why": f"tcompile failed: {type(exc).__name__}: {exc}"[:300]}
    doc["traceback"] = traceback.format_exc()[-4000:]
    return doc


def serve(work: Path) -> int:
    """A check server (triage's local slots, triage_capture.py): one request a line of
    stdin -- ``{"run_dir": ..., "tries": [[words, stage], ...]}`` -- its answer a line of
    stdout, as ``--try`` prints it; the worker kept from one to the next (Held)."""
    held = Held(work)
    # the requests on a descriptor of their own: a worker pool passes the program's
    # stdin on to its workers (compiler/stdin.py), and would read them from fd 0
    requests = os.fdopen(os.dup(0), "r")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    try:
        for line in requests:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
                tries = [(str(w).split(), b or None) for w, b in req["tries"]]
                doc = check_many(str(req["run_dir"]), tries, held)
            except Exception as exc:  # noqa: BLE001 -- answered as tcompile's failure
                held.close()
                doc = _failed(exc)
            sys.stdout.write(json.dumps(doc) + "\n")
            sys.stdout.flush()
    finally:
        held.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tcompile.repro.jobs.capture_check")
    p.add_argument("run_dir", nargs="?")
    p.add_argument("--without", action="append", default=[])
    p.add_argument("--backend", default=None)
    p.add_argument("--try", dest="tries", action="append", default=[], type=_parse_try)
    p.add_argument("--serve", metavar="WORK_DIR", default=None)
    a = p.parse_args(argv)
    if a.serve:
        return serve(Path(a.serve))
    if not a.run_dir or bool(a.without) == bool(a.tries):
        p.error("give RUN_DIR and --without (one switch) or --try (several, one after the other)")
    try:
        doc = check_many(a.run_dir, a.tries) if a.tries else check(a.run_dir, a.without, a.backend)
    except Exception as exc:  # noqa: BLE001 -- tcompile's own failure: said, never an answer
        print(json.dumps(_failed(exc)))
        return int(ExitCode.INTERNAL)
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
