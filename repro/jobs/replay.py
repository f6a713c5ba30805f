"""``tcompile replay``: re-run only the recorded frame, and say whether it fails the same.

The frame runs in a child process (``python -c DRIVER``, child/replay_driver.py)
under the same hooks as ``tcompile run``, so what it compiles is numbered, checked and
classified exactly as in the program, and a crash takes down the child, not tcompile.
The record's metadata is checked here first (record.py), so a bad file is a one-line
error before anything executes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
from typing import IO, TYPE_CHECKING, Any

from tcompile.compiler import layout
from tcompile.compiler.exitcodes import ExitCode, InternalError, UsageError
from tcompile.compiler.failure import Failure
from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.protocol import REPLAY_DRIVER
from tcompile.compiler.record_format import (
    RecordError,
    RecordInfo,
    check_payload,
    is_trusted,
    read_info,
    read_payload,
)
from tcompile.compiler.runner import new_run_dir
from tcompile.compiler.signature import FailureSignature

from .classify import RunOptions, RunReport, run_and_classify

if TYPE_CHECKING:
    from .bisect_report import MinifyNext
    from .minify_types import MinifyReport


@dataclasses.dataclass
class ReplayReport:
    record: str
    function: str
    outcome: str  # "reproduced" | "different" | "none" | "not-a-compiler-bug"
    exit_code: int
    explanation: str
    recorded_signature: str | None
    signature: str | None  # the replay's failure (the first one), if any
    failures: list[Failure]
    user_stack: list[str]
    seconds: float
    original_seconds: float | None  # how far into the program the frame failed
    warnings: list[str]
    compile: dict[str, object]  # how the frame was compiled (fullgraph, dynamic, ...)
    run_dir: str
    command: list[str]
    run: dict[str, Any] | None = None
    minify: MinifyReport | None = None  # `replay --minify`: the minify job's report
    next_command: str | None = None  # what to type next: minify what the replay showed

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(dataclasses.replace(self, failures=[], minify=None))
        out["failures"] = [f.to_json() for f in self.failures]
        if self.minify is not None:
            out["minify"] = self.minify.to_json()
        else:
            out.pop("minify")
        return out

    def minify_args(self, trust: bool = False) -> MinifyNext | None:
        """``replay --minify``: the first replayed failure that is in a graph; or, when
        the recorded capture failure reproduced, the record itself (its frame's source
        is minified); None when there is nothing to minify."""
        target = next((f for f in self.failures if f.graph is not None), None)
        if target is not None:
            return {"graph": int(target.graph)}
        if self.outcome == "reproduced":
            return {"record": self.record, "trust": trust}
        return None


def load_info(path: str) -> RecordInfo:
    """The record's metadata, its payload checked against the checksum (nothing is
    unpickled or executed)."""
    try:
        info = read_info(path)
        check_payload(info)
    except RecordError as exc:
        raise UsageError(str(exc)) from None
    return info


def check_trust(info: RecordInfo, trust: bool) -> None:
    """Replaying executes the record's code: only records this user's tcompile signed,
    unless the user says ``--trust``.  Checked before a byte is unpickled; the outer
    container is then read with an unpickler that loads no class."""
    if not trust:
        if info.kind == "torch":
            raise UsageError(
                f"{info.path} is one of torch's own records, which carry no signature; "
                "replaying executes the code it holds: pass --trust if you trust it"
            )
        if not is_trusted(info):
            raise UsageError(
                f"{info.path} is not signed by this user's tcompile (a record from elsewhere, "
                "or altered); replaying executes the code it holds: pass --trust if you trust it"
            )
    if info.kind == "tcompile":
        try:
            read_payload(info)
        except RecordError as exc:
            raise UsageError(str(exc)) from None


def check_versions(info: RecordInfo) -> list[str]:
    """Warnings (torch or tcompile differ: replay still tries); a Python minor version
    that differs is an error (code objects do not carry across)."""
    meta = info.meta
    warnings: list[str] = []
    if info.kind == "torch":
        return warnings
    py = str(meta.get("python", ""))
    here = ".".join(map(str, sys.version_info[:2]))
    if py and ".".join(py.split(".")[:2]) != here:
        raise UsageError(
            f"{info.path} was written by Python {py}; this is Python {here}, and code objects "
            "do not carry across Python versions: replay it with Python "
            f"{'.'.join(py.split('.')[:2])}"
        )
    here_torch = _torch_version()
    if meta.get("torch") and here_torch and meta["torch"] != here_torch:
        warnings.append(
            f"the record was written with torch {meta['torch']}; this is torch "
            f"{here_torch}: replaying anyway, the failure may differ"
        )
    if meta.get("unrecorded"):
        names = ", ".join(sorted(meta["unrecorded"]))
        warnings.append(f"the record could not hold {names}: the replay may fail differently")
    return warnings


def _torch_version() -> str:
    """Without importing torch (seconds) in the parent."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return ""


@dataclasses.dataclass
class ReplayOptions:
    """What ``tcompile replay`` is asked (its options, typed once)."""

    backend: str | None = None
    fullgraph: bool | None = None  # None: as recorded
    accuracy: str = "off"
    timeout: float | None = None
    out: str | None = None
    observer: Observer | None = None
    stdout: IO[str] | None = None
    stderr: IO[str] | None = None
    trust: bool = False  # a record tcompile did not sign is run anyway


def replay(path: str, o: ReplayOptions) -> ReplayReport:
    """The recorded frame run again under torch.compile, in a driver process."""
    backend, fullgraph, accuracy, timeout, out = (
        o.backend,
        o.fullgraph,
        o.accuracy,
        o.timeout,
        o.out,
    )
    stdout, stderr, trust = o.stdout, o.stderr, o.trust
    observer = o.observer or NullObserver()
    info = load_info(path)
    check_trust(info, trust)
    warnings = check_versions(info)
    path = os.path.abspath(path)
    run_dir = new_run_dir(out, "replay")
    status_path = os.path.join(run_dir, layout.DRIVER_STATUS)
    command = [sys.executable, "-c", REPLAY_DRIVER, path]
    if fullgraph is not None:
        command.append("--fullgraph" if fullgraph else "--no-fullgraph")
    command += ["--status", status_path]
    if info.kind == "tcompile":  # the driver reads exactly the payload checked here
        command += ["--sha256", str(info.meta.get("payload_sha256"))]
    observer.status(f"replaying {info.meta.get('function', '?')} from {path}")
    report = run_and_classify(
        command,
        RunOptions(
            out=run_dir,
            stage=backend,
            accuracy=accuracy,
            timeout=timeout,
            observer=observer,
            stdout=stdout,
            stderr=stderr,
            record="off",
            confirm=False,  # the driver runs the frame eagerly itself: no second process
        ),
    )
    status: dict[str, Any] = {}
    try:
        with open(status_path) as f:
            status = json.load(f)
    except (OSError, ValueError):
        pass
    if status.get("error"):
        raise UsageError(f"{path}: {status['error']}")
    if status.get("driver_error"):
        raise InternalError(f"the replay driver failed on {path}: {status['driver_error']}")
    if not status and report.returncode not in (0, None):
        raise InternalError(
            f"the replay driver failed before running the frame (exit status "
            f"{report.returncode}); its run is in {report.run_dir}"
        )
    if status.get("missing"):
        warnings.append(
            "the record has no value for argument(s) "
            f"{', '.join(status['missing'])}: they were passed as None"
        )
    return _judge(info, report, status, warnings, command, path)


def _judge(
    info: RecordInfo,
    report: RunReport,
    status: dict[str, Any],
    warnings: list[str],
    command: list[str],
    path: str,
) -> ReplayReport:
    meta = info.meta
    recorded = FailureSignature.from_json(meta["signature"]) if meta.get("signature") else None
    recorded_text = str(recorded) if recorded else meta.get("signature_text")
    failures = report.failures
    first = failures[0] if failures else None
    if recorded is not None:
        same = any(recorded.matches(f.signature) for f in failures)
    else:  # torch's records: the exception type, from the file name
        want = str(meta.get("exc_type") or "")
        same = bool(want) and any(f.signature.exc_type.rsplit(".", 1)[-1] == want for f in failures)
    if status.get("eager_fails_same"):
        outcome, code = "not-a-compiler-bug", ExitCode.NOT_COMPILER
        explanation = (
            "the frame fails the same way without torch.compile "
            f"({status['eager_fails_same']}): not a compiler bug"
        )
    elif same:
        outcome, code = "reproduced", ExitCode.COMPILER_FAILURE
        explanation = f"the same failure reproduces: {recorded_text}"
    elif failures:
        outcome, code = "different", ExitCode.COMPILER_FAILURE
        explanation = (
            f"a different failure: {failures[0].text} (recorded: {recorded_text or 'unknown'})"
        )
        if recorded is None:  # torch's records say little of the failure
            outcome = "failed"
            explanation = f"the frame fails: {failures[0].text}"
    elif status.get("raised") and not status.get("finished"):
        outcome, code = "different" if recorded_text else "failed", ExitCode.COMPILER_FAILURE
        explanation = (
            f"the frame fails outside any compiled graph ({status['raised']}), and not "
            "without torch.compile"
        )
    else:
        outcome, code = "none", ExitCode.OK
        explanation = "the frame compiles and runs without a failure"
        if recorded_text:
            explanation += f" (recorded: {recorded_text})"
    stack: list[str] = []
    for f in failures:
        if f.user_stack:
            stack = list(f.user_stack)
            break
    return ReplayReport(
        record=path,
        function=str(meta.get("function", "?")),
        outcome=outcome,
        exit_code=int(code),
        explanation=explanation,
        recorded_signature=recorded_text,
        signature=first.text if first else None,
        failures=failures,
        user_stack=stack,
        seconds=report.seconds,
        original_seconds=meta.get("seconds_into_program"),
        warnings=warnings,
        compile=status.get("compile") or meta.get("compile") or {},
        run_dir=report.run_dir,
        command=command,
        run=report.to_json(),
        next_command=(
            f"tcompile replay --minify {shlex.quote(path)}"
            if outcome in ("reproduced", "different")
            else None
        ),
    )


__all__ = ["ReplayReport", "load_info", "replay"]
