"""Which failure ``tcompile minify`` works on: the one the user picked (``--graph``,
``--match``), and what to say when there is none, or no graph to minify."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.failure import Failure
from tcompile.compiler.signature import FailureKind

from .minify_types import After, CaptureMinifyReport, MinifyReport

if TYPE_CHECKING:
    from .classify import RunReport


def pick_failure(failures: list[Failure], graph: int | None, match: str | None) -> Failure | None:
    for f in failures:
        if graph is not None and f.graph != graph:
            continue
        if match is not None and not re.search(match, f.text):
            continue
        return f
    return None


def graphless_report(target: Failure, run_dir: Path, t0: float) -> MinifyReport:
    """A failure with no graph to minify: outside any graph, or in Dynamo's capture."""
    if target.kind != FailureKind.CAPTURE:
        return MinifyReport(
            ExitCode.COMPILER_FAILURE,
            "the failure shows outside any compiled graph (the program fails with "
            f"torch.compile and not without it): no graph to minify ({target.text})"
            + "".join(f"; graph {n['graph']}: {n['text']}" for n in target.more_precise or []),
            signature=target.signature,
            run_dir=str(run_dir),
            seconds=time.monotonic() - t0,
        )
    record = target.record
    return CaptureMinifyReport(
        ExitCode.COMPILER_FAILURE,
        "the failure is in TorchDynamo's capture, before any graph exists: nothing to minify "
        f"({target.text})"
        + (f"; the failing frame is recorded: tcompile replay {record}" if record else ""),
        signature=target.signature,
        record=record,
        run_dir=str(run_dir),
        seconds=time.monotonic() - t0,
    )


def choose_target(
    report: RunReport, graph: int | None, match: str | None, after: str
) -> Failure | MinifyReport | None:
    """The failure to minify; a report when there is nothing to do (not a compiler
    bug), None when there is no failure at all.  Bad choices are UsageErrors."""
    if report.exit_code in (ExitCode.NOT_COMPILER, ExitCode.FLAKY):
        return MinifyReport(ExitCode(report.exit_code), report.explanation)
    dynamo_graphs = [g for g in report.graphs if g.get("level") == "dynamo"]
    if graph is not None and graph >= len(dynamo_graphs):
        raise UsageError(
            f"--graph {graph}: the program compiled {len(dynamo_graphs)} graph(s) "
            f"(0..{len(dynamo_graphs) - 1})"
        )
    if not report.failures:
        return None
    target = pick_failure(report.failures, graph, match)
    if target is None:
        what = []
        if graph is not None:
            what.append(f"in graph {graph}")
        if match is not None:
            what.append(f"matching {match!r}")
        found = "; ".join(f.text for f in report.failures)
        raise UsageError(f"no failure {' and '.join(what)} (found: {found})")
    if after == After.AOT and target.before_aot_compile:
        raise UsageError(
            f"--after aot cannot reach this failure: it is raised while AOTAutograd "
            f"prepares the {target.graph_kind} graph of graph {target.graph}, before that "
            "graph's own compile (use --after dynamo)"
        )
    if (
        after == After.AOT
        and target.graph is not None
        and (
            target.stage != "inductor"
            or target.graph_kind not in ("forward", "backward", "inference")
        )
    ):
        raise UsageError(
            f"--after aot needs a failure in an AOT graph compiled by inductor; this one is "
            f"in the {target.graph_kind} graph of stage {target.stage} "
            "(use --after dynamo)"
        )
    return target
