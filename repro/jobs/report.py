"""``tcompile report``: a bug report ready for PyTorch's issue tracker.

One run finds every failure; failures with the same signature are one bug (across
graphs and processes).  Each bug (up to ``max_bugs``) is bisected -- reusing that run
as the baseline -- and minified; ``report.md`` then has, per bug, the shape PyTorch's
bug template asks for: a title (``[inductor] relu gives wrong results on CPU``), "Describe the
bug" in a few sentences, the repro inline with its output, the bisect result with the
``TORCH_BISECT_*`` variables to show good and bad by hand, the generated code around
the culprit; and once, "Versions".  Kept under GitHub's body limit.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path
from typing import Any

from tcompile.compiler import layout
from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.failure import group
from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.runner import new_run_dir, write_json
from tcompile.compiler.signature import FailureKind, FailureSignature

from .bisect_report import BisectOptions, MinifyNext
from .bisection import baseline_run, run_bisect
from .run_record import given_baseline

GITHUB_LIMIT = 65_536  # characters in an issue body
_TAGS = {
    "eager": "dynamo",
    "aot_eager": "aot_autograd",
    "aot_eager_decomp_partition": "decompositions",
    "inductor": "inductor",
}


@dataclasses.dataclass
class ReportOptions:
    """What ``tcompile report`` is asked (its options, typed once)."""

    accuracy: str = "off"
    timeout: float | None = None
    jobs: int = 1
    max_bugs: int = 3  # distinct failures bisected and minified, the first ones
    level: str = "auto"  # source: a graph's failure gets a user-level repro too
    out: str | None = None
    observer: Observer | None = None
    stdout: Any = None
    stderr: Any = None
    trace: str | None = None  # torch's structured trace of the first run
    confirm: bool | None = None
    max_time: float | None = None  # a program-level minify's seconds from the report's start
    # the run folder of a ``run --capture`` of the same command: the report's first run
    # (triage classifies a script with it, then reports from it: no second baseline)
    baseline: str | None = None


@dataclasses.dataclass
class Report:
    exit_code: int
    message: str
    report: str | None = None  # report.md
    title: str | None = None
    bugs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    versions: dict[str, Any] = dataclasses.field(default_factory=dict)
    run_dir: str | None = None
    seconds: float = 0.0
    characters: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_report(command: list[str], o: ReportOptions) -> Report:
    """``tcompile report``: one run, then each distinct failure bisected and minified."""
    accuracy, timeout, jobs, max_bugs, level = o.accuracy, o.timeout, o.jobs, o.max_bugs, o.level
    out, observer, stdout, stderr, trace = o.out, o.observer, o.stdout, o.stderr, o.trace
    confirm, max_time = o.confirm, o.max_time
    from tcompile.compiler.pool import close_parked
    from tcompile.compiler.standby import close as close_standby

    from .minify_job import run_minify

    observer = observer or NullObserver()
    t0 = time.monotonic()
    run_dir = Path(new_run_dir(out, "report"))
    if o.baseline:
        if trace:
            raise UsageError("--trace traces the report's first run, and --baseline's is that")
        base = given_baseline(o.baseline, command, accuracy)
        observer.status(f"starting from the run in {o.baseline} (the program is not run first)")
    else:
        observer.status("running the program once: every graph, every failure")
        base = baseline_run(
            command, out=str(run_dir), accuracy=accuracy, timeout=timeout, stdout=stdout,
            stderr=stderr, trace=trace,
        )  # fmt: skip
    if base.exit_code != ExitCode.COMPILER_FAILURE:
        close_standby()
        return Report(
            base.exit_code, base.explanation, run_dir=str(run_dir), seconds=time.monotonic() - t0
        )
    bugs = []
    common = dict(accuracy=accuracy, timeout=timeout, jobs=jobs, out=str(run_dir), stdout=stdout)
    common["stderr"] = stderr
    for g in group(base.failures)[:max_bugs]:
        bug = dict(g)
        first = next(f for f in base.failures if f.text == g["signature"])
        bug.update(graph=first.graph, graph_kind=first.graph_kind, record=first.record)
        bug["device"] = _device(base.graphs, first.graph)
        page = ((base.trace or {}).get("pages") or {}).get(str(first.graph))
        if base.trace:
            bug["trace"] = {
                "dir": base.trace["dir"],
                "tlparse": base.trace.get("tlparse"),
                "page": page,
            }
        args: MinifyNext = {}
        if first.kind == FailureKind.CAPTURE and first.graph is None:
            # a frame Dynamo could not capture: no graph, no bisect; its record's
            # function minified to a capture-level repro (capture_job.py), the program
            # not run again (issue 62: a capture failure's cluster got no repro)
            if first.record:
                from .minify_job import minify_next

                observer.status(f"minifying the frame Dynamo could not capture: {g['signature']}")
                mini = minify_next(
                    command, {"record": first.record}, out=str(run_dir), timeout=timeout,
                    observer=observer,
                )  # fmt: skip
                bug["minify"] = mini.to_json()
            bugs.append(bug)
            continue
        if first.graph is not None or first.kind != FailureKind.TIMEOUT:
            # a failure outside any graph (the program's own check) is bisected too: the
            # program's exit is the oracle (a GroupNorm decomposition's lost precision,
            # #181696, is named so); a hang is not (every question would time out)
            observer.status(f"bisecting: {g['signature']}")
            asked = BisectOptions(
                match=_match(first.signature), observer=observer, confirm=confirm,
                keep_worker=True, **common,
            )  # fmt: skip
            bis = run_bisect(command, asked, baseline=base)
            bug["bisect"] = bis.to_json()
            write_json(run_dir / layout.BISECTED, bug["bisect"])  # triage's, while minify runs
            if first.graph is not None:
                args = bis.minify_args() or {"graph": first.graph, "backend": None}
                args["level"] = level  # source: a user-level repro beside the graph's
        # a failure no graph holds is minified at the program level (program_job.py)
        observer.status(f"minifying: {g['signature']}")
        match = _match(first.signature) if first.graph is not None else None
        if max_time:  # counted from the report's start: what is left of it, at least 30 s
            args["max_time"] = max(30.0, max_time - (time.monotonic() - t0))
        mini = run_minify(command, match=match, observer=observer, **args, **common)
        close_parked()  # a bisect's worker no minify took (none, or another capture)
        bug["minify"] = mini.to_json()
        bugs.append(bug)
    close_standby()  # the baseline's, if no bisect took it
    return write_report(
        run_dir, bugs, base_seconds=time.monotonic() - t0, program_dirs=_program_dirs(command)
    )


def _program_dirs(command: list[str]) -> list[str]:
    """The folders the program's own files are in: the script's, the working one."""
    dirs = [os.getcwd()]
    dirs += [os.path.dirname(os.path.abspath(a)) for a in command if a.endswith(".py")]
    return list(dict.fromkeys(dirs))


def _device(graphs: list[dict[str, Any]], graph: int | None) -> str | None:
    """Where the failing graph ran; for a failure no graph holds (CUDA graph trees, a
    program-level one), where the program's graphs ran -- CUDA if any did."""
    rows = [g for g in graphs if g.get("level") == "dynamo" and g.get("device")]
    mine = [g["device"] for g in rows if graph is not None and g.get("index") == graph]
    if mine:
        return mine[0]
    kinds = {g["device"] for g in rows}
    return "cuda" if "cuda" in kinds else (kinds.pop() if len(kinds) == 1 else None)


def _match(sig: FailureSignature) -> str:
    """The failure whatever stage shows it (bisect may name a lower one): the regex of
    its text after the stage."""
    return re.escape(str(dataclasses.replace(sig, stage="")).lstrip("/"))


def write_report(
    run_dir: Path,
    bugs: list[dict[str, Any]],
    *,
    base_seconds: float = 0.0,
    program_dirs: list[str] | None = None,
) -> Report:
    from tcompile.repro.environment import full_environment
    from tcompile.repro.shareable import places, scrub

    try:
        versions = versions_of(full_environment())
    except Exception:  # noqa: BLE001 -- torch's import broke in this process (a SIGTERM
        # inside a first ``import torch``: a second one raises "duplicate registrations"):
        # the report of what was found is written all the same, from the package metadata
        import platform
        from importlib import metadata

        try:
            torch_version = metadata.version("torch")
        except metadata.PackageNotFoundError:
            torch_version = None
        versions = versions_of(
            {"torch": torch_version, "python": platform.python_version(), "os": platform.platform()}
        )
    from tcompile.repro.triage_cluster import culprit_of

    for bug in bugs:
        bug["title"] = title(bug)
        bug["description"] = describe(bug)
        # the culprit as bisect named it, the record triage clusters by (issue 60)
        bug["culprit"] = culprit_of(bug) if bug.get("bisect") else None
    parts = []
    if len(bugs) == 1:
        parts.append(f"# {bugs[0]['title']}\n\n" + section(bugs[0], level="###"))
    else:
        parts.append(f"# torch.compile: {len(bugs)} bugs in one program\n")
        for k, bug in enumerate(bugs, 1):
            parts.append(
                f"## Bug {k} of {len(bugs)}: {bug['title']}\n\n" + section(bug, level="###")
            )
    parts.append(
        "### Versions\n\n```\n" + "\n".join(f"{k}: {v}" for k, v in versions.items()) + "\n```\n"
    )
    # for an issue: no folder of this machine (the project, --out, home, temp)
    text = scrub("\n".join(parts), places(program_dirs or [], str(run_dir)))
    if len(text) > GITHUB_LIMIT:
        layout.write_file(run_dir / layout.REPORT_FULL, text)
        note = "\n\n(cut to GitHub's limit: the whole report is report-full.md beside it)\n"
        text = text[: GITHUB_LIMIT - len(note)] + note
    path = run_dir / layout.REPORT
    layout.write_file(path, text)
    return Report(
        ExitCode.COMPILER_FAILURE,
        f"{len(bugs)} bug(s) reported in {path}",
        report=str(path),
        title=bugs[0]["title"] if bugs else None,
        bugs=bugs,
        versions=versions,
        run_dir=str(run_dir),
        seconds=base_seconds,
        characters=len(text),
    )


def title(bug: dict[str, Any]) -> str:
    """``[inductor] relu gives wrong results on CPU`` from stage, op, kind and device."""
    mini = bug.get("minify") or {}
    bis = bug.get("bisect") or {}
    stage = bis.get("stage") or mini.get("stage") or bug.get("stage") or "?"
    tag = _TAGS.get(stage, stage)
    if bis.get("subsystem") in ("decomposition",):
        tag = "decompositions"
    ops = [o for o in (mini.get("ops") or []) if o not in ("getitem",)]
    op = ", ".join(dict.fromkeys(ops[:3])) if ops else "a compiled graph"
    where = str(mini.get("device") or bug.get("device") or "")
    if bis.get("subsystem") == "cudagraphs" or where.startswith("cuda"):
        device = "CUDA"
    else:
        device = where.upper() if where and where != "cpu" else "CPU"
    exc_type = bug.get("exc_type") or ""
    phrase = {
        # a wrong gradient is the backward graph's (accuracy.graph_kind_of), not read
        # back from the signature's words (issue 60)
        "accuracy": "gives wrong gradients"
        if bug.get("graph_kind") == "backward"
        else "gives wrong results",
        "compile": f"fails to compile ({exc_type})",
        "runtime": f"raises {exc_type} at run time",
        "crash": f"crashes ({exc_type})",
        "timeout": "hangs",
        "capture": f"fails in Dynamo ({exc_type})",
    }.get(bug.get("kind", ""), "fails")
    return f"[{tag}] {op} {phrase} on {device}"


def describe(bug: dict[str, Any]) -> str:
    """Two or three sentences from the findings."""
    if bug.get("graph") is not None:
        where = f"graph {bug.get('graph')} ({bug.get('graph_kind')})"
    elif bug.get("kind") == "capture":
        where = "Dynamo's capture"
    else:  # the program's own check, or its exit: no graph raised it
        where = "the program itself, outside any compiled graph"
    seen = (
        f", {bug['count']} times in graphs {', '.join(map(str, bug['graphs']))}"
        if bug.get("count", 1) > 1
        else ""
    )
    text = [f"Under torch.compile the program fails in {where}{seen}: {_said(bug)}."]
    bis = bug.get("bisect") or {}
    if bis.get("subsystem") == "config":
        text.append(f"Bisection: {bis.get('detail')} (stage {bis.get('stage')}).")
    elif bis.get("subsystem"):
        did = ", ".join(f"{k} x{v}" for k, v in (bis.get("effects") or {}).items())
        text.append(
            f"Bisection names stage {bis.get('stage')}, {bis['subsystem']} application "
            f"#{bis.get('application')} ({bis.get('detail')}"
            + (f"; it did: {did}" if did else "")
            + (f"; the pattern {bis['pattern']}" if bis.get("pattern") else "")
            + ") as the culprit"
            + (" (flaky: " + str(bis.get("flaky_detail")) + ")" if bis.get("flaky") else "")
            + "."
        )
    elif bis.get("stage"):
        text.append(f"Bisection names stage {bis['stage']}.")
    mini = bug.get("minify") or {}
    if mini.get("repro"):
        # what the verifying runs showed, no more: a program-level repro ran with
        # torch.compile off, a graph's with backend="eager" (issue 59)
        passes = (
            " and passes with torch.compile off"
            if mini.get("level") == "program" or (mini.get("capture") and mini.get("eager_passes"))
            else ' and passes with backend="eager"'
            if mini.get("eager_passes")
            else ""
        )
        state = (
            f"reproduces with only torch installed{passes}"
            if mini.get("verified")
            else "is NOT verified"
        )
        if mini.get("level") == "program":
            prog = mini.get("program") or {}
            text.append(
                f"No single graph holds it: the program shrinks from {prog.get('lines_before')} "
                f"to {prog.get('lines_after')} lines; the repro below {state}."
            )
        elif mini.get("capture"):  # a frame Dynamo could not capture: its function
            cap = mini["capture"]
            text.append(
                f"The frame's code (`{cap.get('entry')}`) shrinks from {cap.get('lines_before')} "
                f"to {cap.get('function_lines')} lines; the repro below {state}."
            )
        else:
            text.append(
                f"The graph shrinks from {mini.get('nodes_before')} to {mini.get('nodes_after')} nodes; the repro below {state}."
            )
        first = (mini.get("divergence") or {}).get("minimal") or bis.get("divergence") or {}
        if first.get("node"):
            kernel = f" in kernel `{first['kernel']}`" if first.get("kernel") else ""
            text.append(
                f"The values first go wrong at `{first['op']}`{kernel} ({first.get('source')})."
            )
        if mini.get("switches"):
            text.append(f"Numerics: {mini['switches']['verdict']}.")
        src = mini.get("source") or {}
        if src.get("repro"):
            text.append(
                f"In user-level PyTorch, the program shrinks from {src.get('lines_before')} to "
                f"{src.get('lines_after')} lines around the source lines the graph came from; "
                + (
                    "that repro is verified too."
                    if src.get("verified")
                    else "that repro is NOT verified."
                )
            )
    elif bug.get("record"):
        text.append(
            f"The failing frame is recorded for `tcompile replay` ({Path(bug['record']).name})."
        )
    return " ".join(text)


def _said(bug: dict[str, Any]) -> str:
    """The failure as the program said it -- its real shapes, sizes and indices (only
    paths of this machine are scrubbed, later, from the whole page) and the pattern or
    pass its text names (``raised in inductor's _sfdp_replacement_28``) -- then its
    signature, which is what tcompile compares."""
    lines = [ln.strip() for ln in str(bug.get("message") or "").splitlines() if ln.strip()]
    sig = str(bug.get("signature") or "")
    if not lines:
        return f"`{sig}`"
    where = [ln for ln in lines[1:4] if ln.startswith("(raised in ")]
    kind = sig.split(":", 1)[0]
    return (
        f"`{lines[0][:500]}`" + (f" {where[0]}" if where else "") + (f" ({kind})" if kind else "")
    )


def section(bug: dict[str, Any], *, level: str) -> str:
    out = [f"{level} 🐛 Describe the bug\n\n{bug['description']}\n"]
    mini = bug.get("minify") or {}
    if mini.get("repro") and Path(mini["repro"]).exists():
        out.append("```python\n" + Path(mini["repro"]).read_text().rstrip() + "\n```\n")
        if mini.get("repro_output"):
            out.append("Output:\n\n```\n" + str(mini["repro_output"]).strip() + "\n```\n")
    src = mini.get("source") or {}
    if mini.get("source_lines"):
        out.append(
            "From these lines of the program:\n\n```\n"
            + "\n".join(
                f"{Path(e['file']).name}:{e['line']}  {e['code']}" for e in mini["source_lines"]
            )
            + "\n```\n"
        )
    if src.get("repro") and Path(src["repro"]).exists():
        out.append(
            "The same failure in user-level PyTorch"
            + (" (verified)" if src.get("verified") else " (NOT verified)")
            + ":\n\n```python\n"
            + Path(src["repro"]).read_text().rstrip()
            + "\n```\n"
        )
    bis = bug.get("bisect") or {}
    if bis.get("bad"):
        bad = " ".join(f"{k}={v}" for k, v in bis["bad"].items())
        good = " ".join(f"{k}={v}" for k, v in bis["good"].items())
        out.append(
            f"Bisect ({bis.get('runs')} runs): on the original program, with torch's own hooks,\n\n"
            f"```\n{bad} python <program>   # fails\n{good} python <program>   # passes\n```\n"
        )
    trace = bug.get("trace") or {}
    if trace.get("tlparse"):
        where = f"the failing graph's page: `{trace['page']}`" if trace.get("page") else ""
        out.append(f"Trace (TORCH_TRACE, tlparse): `{trace['tlparse']}` {where}\n")
    elif trace.get("dir"):
        out.append(f"Trace (TORCH_TRACE): `{trace['dir']}` (tlparse not installed)\n")
    excerpt = kernel_excerpt(mini.get("kernel"))
    if excerpt:
        lang = "cpp" if mini["kernel"].endswith(".cpp") else "python"
        out.append(
            f"Generated code ({Path(mini['kernel']).name}, the culprit's kernel first):\n\n```{lang}\n{excerpt}\n```\n"
        )
    return "\n".join(out)


def kernel_excerpt(path: str | None, lines: int = 60) -> str:
    """The first kernel of the generated code (the one naming the culprit), cut short."""
    if not path or not Path(path).exists():
        return ""
    text = Path(path).read_text(errors="replace")
    blocks = re.split(r"\n(?=(?://|#) ---- )", text)
    first = blocks[0].rstrip().splitlines()
    return "\n".join(first[:lines] + (["..."] if len(first) > lines else []))


def versions_of(env: dict[str, Any]) -> dict[str, Any]:
    """The lines of ``python -m torch.utils.collect_env`` a compiler bug needs."""
    isa = "unknown"
    try:
        import torch

        isa = torch.backends.cpu.get_cpu_capability()
    except Exception:
        pass
    return {
        "PyTorch version": env.get("torch"),
        "PyTorch git": env.get("torch_git"),
        "CUDA used to build PyTorch": env.get("cuda") or "None",
        "GPU models and configuration": env.get("gpu") or "None",
        "Triton": env.get("triton") or "None",
        "OS": env.get("os"),
        "Python version": env.get("python"),
        "CPU ISA (torch.backends.cpu.get_cpu_capability)": isa,
        "C++ compiler": str(env.get("cxx") or "None").split(" (", 1)[-1].rstrip(")"),
    }


def report_after(run_dir: str, *, bisect: Any = None, minify: Any = None) -> str | None:
    """``bisect --report`` / ``minify --report``: report.md from one job's findings."""
    if (bisect is None or bisect.signature is None) and (
        minify is None or minify.signature is None
    ):
        return None
    sig = (bisect.signature if bisect is not None else None) or minify.signature
    source = bisect if bisect is not None else minify
    record = minify.failure_signature() if minify is not None else None
    parsed = record or FailureSignature.parse(sig)  # a bisect's: its JSON's text
    bug = {
        "signature": sig,
        "kind": parsed.kind if parsed else "",
        "exc_type": parsed.exc_type if parsed else "",
        "stage": source.stage,
        "count": 1,
        "graph": source.graph,
        "graphs": [source.graph] if source.graph is not None else [],
        "graph_kind": source.graph_kind,
        "record": getattr(source, "record", None),  # bisect, or a capture failure's minify
    }
    if bisect is not None:
        bug["bisect"] = bisect.to_json()
        minify_json = bisect.minify
    else:
        minify_json = minify.to_json()
    if minify_json:
        bug["minify"] = minify_json
    return write_report(Path(run_dir), [bug]).report
