"""Membership on the captured graph (issue 62): does a culprit's switch, turned off, make
a script's failure go away -- asked of the failing graph its ``run --capture`` saved,
one or two compiles, the program not run again.

At most two judgements in one worker (capture_bisect.py's worker: it serves the
saved graph with its failing call's inputs), at the culprit's stage (``--backend``: a
decomposition's culprit is judged where it applies):

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

    python -m tcompile.repro.jobs.capture_check RUN_DIR --without W [--without W]
        [--backend STAGE]

prints one JSON document (``answer``, ``unchanged``, ``off``, ``why``, ``seconds``,
``capture``) and exits 0; 4 when tcompile itself failed.
"""

from __future__ import annotations

import argparse
import json
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


def check(run_dir: str, words: list[str], backend: str | None) -> dict[str, Any]:
    """The two judgements above: the answer, each verdict, why there is no answer."""
    from .minify_search import read_capture

    t0 = time.monotonic()
    base, target, cap, why = captured_failure(run_dir)
    out: dict[str, Any] = {"answer": UNKNOWN, "unchanged": None, "off": None, "why": why}
    out["capture"] = str(cap) if cap else None
    if cap is None or not base.captured:
        out["why"] = why or "the run was not made with --capture"
        return out
    meta = json.loads((cap / layout.CAPTURE_META).read_text())
    work = Path(run_dir) / "capture-checks" / f"{time.time_ns()}"
    pool, _ = capture_pool(cap, meta, target, base.accuracy, base.command, work, jobs=1)
    starting = ThreadPoolExecutor(1)
    try:
        ready = starting.submit(pool.start)  # the worker imports torch while this reads
        gm, inputs, _ = read_capture(cap)
        ready.result()
        _judge(out, pool, gm, inputs, words, backend)
    finally:
        starting.shutdown()
        pool.close()
    out["seconds"] = round(time.monotonic() - t0, 2)
    return out


def _judge(
    out: dict[str, Any],
    pool: WorkerPool,
    gm: torch.fx.GraphModule,
    inputs: list[object],
    words: list[str],
    backend: str | None,
) -> None:
    """The switch off first: the failure still showing is a ``no`` from one compile (the
    graph fails alone with it off); a pass must then be checked against the graph as
    it is, which must fail -- else the pass says nothing of the switch."""
    stage = {"stage": backend} if backend else {}
    off, _ = pool.evaluate(gm, inputs, request={**stage, "bisect": switch_config(words)})
    out["off"] = off.value
    if off in _UNFINISHED:
        out["why"] = f"judging the graph with the switch off ended {off.value}"
        return
    if off is not Verdict.PASS:
        out["answer"], out["why"] = NO, f"with the switch off it ends {off.value}"
        return
    asked: dict[str, Any] = {"limits": {}, "toggles": {}}
    unchanged, _ = pool.evaluate(gm, inputs, request={**stage, "bisect": asked})
    out["unchanged"] = unchanged.value
    if unchanged is Verdict.SAME_FAILURE:
        out["answer"], out["why"] = MEMBER, ""
    elif unchanged in _UNFINISHED:
        out["why"] = f"judging the captured graph ended {unchanged.value}"
    else:
        out["why"] = f"the captured graph does not fail alone ({unchanged.value})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tcompile.repro.jobs.capture_check")
    p.add_argument("run_dir")
    p.add_argument("--without", action="append", default=[])
    p.add_argument("--backend", default=None)
    a = p.parse_args(argv)
    try:
        doc = check(a.run_dir, a.without, a.backend)
    except Exception as exc:  # noqa: BLE001 -- tcompile's own failure: said, never an answer
        doc = {"answer": UNKNOWN, "why": f"tcompile failed: {type(exc).__name__}: {exc}"[:300]}
        doc["traceback"] = traceback.format_exc()[-4000:]
        print(json.dumps(doc))
        return int(ExitCode.INTERNAL)
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
