"""What a command runs after its first job, so that the CLI composes nothing: one
function per command, called once.

``bisect`` -> minify the culprit graph (``--minify``) -> report.md (``--report``);
``minify``: its start case (a record of a frame Dynamo could not capture, a
minifier_launcher.py, or the program) -> report.md (``--report``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tcompile.compiler.exitcodes import UsageError
from tcompile.compiler.record_format import is_record

if TYPE_CHECKING:
    from .bisect_report import BisectOptions, BisectReport
    from .minify_types import MinifyOptions, MinifyReport
    from .replay import ReplayOptions, ReplayReport


def bisect_then(
    command: list[str],
    o: BisectOptions,
    *,
    then_minify: bool = False,
    write_report: bool = False,
) -> BisectReport:
    """``tcompile bisect`` (``o``: its BisectOptions): the bisection, then the culprit
    graph minified where asked (in the bisect's run folder), then report.md where asked."""
    from .bisection import run_bisect

    report = run_bisect(command, o)
    then = report.minify_args() if then_minify else None
    if then is not None:
        from .minify_job import minify_next

        report.minify = minify_next(
            command, then, accuracy=o.accuracy, jobs=o.jobs, out=report.run_dir,
            timeout=o.timeout, observer=o.observer, stdout=o.stdout, stderr=o.stderr,
        ).to_json()  # fmt: skip
    if write_report and report.run_dir:
        from .report import report_after

        report.report = report_after(report.run_dir, bisect=report)
    return report


def minify_start(
    argv: list[str],
    program: Callable[[], list[str]],
    o: MinifyOptions,
    *,
    trust: bool = False,
    write_report: bool = False,
) -> MinifyReport:
    """``tcompile minify`` (``o``: its MinifyOptions): from a record (its frame's source,
    shrunk), a minifier_launcher.py (its graph), or the program (``program()`` makes its
    command, checked), then report.md where asked."""
    jobs, real_inputs, out, timeout, observer = o.jobs, o.real_inputs, o.out, o.timeout, o.observer
    if argv and is_record(argv[0]):
        from .capture_job import minify_capture

        if len(argv) > 1:
            raise UsageError("a record takes no arguments: tcompile minify RECORD")
        return minify_capture(argv[0], trust=trust, out=out, timeout=timeout, observer=observer)
    from tcompile.repro.launcher import is_launcher

    if argv and argv[0].endswith(".py") and is_launcher(argv[0]):
        from .launcher_job import launch

        return launch(
            argv[0], list(argv[1:]), jobs=jobs, out=out, real_inputs=real_inputs,
            observer=observer, trust=trust,
        )  # fmt: skip
    from .minify_job import minify_with

    report = minify_with(program(), o)
    if write_report and report.run_dir:
        from .report import report_after

        report.report = report_after(report.run_dir, minify=report)
    return report


def replay_then(
    record: str,
    o: ReplayOptions,
    *,
    then_minify: bool = False,
    warn: Callable[[str], None] = lambda text: None,
    say: Callable[[str], None] = lambda text: None,
) -> ReplayReport:
    """``tcompile replay`` (``o``: its ReplayOptions): the recorded frame run again,
    then, with ``--minify``, what it showed minified (the frame's source, or the graph
    it compiled).  ``warn`` says the replay's warnings as they come, ``say`` that there
    is nothing to minify."""
    from .replay import replay as run_replay

    report = run_replay(record, o)
    accuracy, backend, trust = o.accuracy, o.backend, o.trust
    for warning in report.warnings:
        warn(warning)
    if then_minify:
        then = report.minify_args(trust=trust)
        if then is None and report.failures:
            say("the replayed failure has nothing to minify")
        elif then is not None:
            from .minify_job import minify_next

            common = dict(
                out=o.out, timeout=o.timeout, observer=o.observer, stdout=o.stdout,
                stderr=o.stderr,
            )  # fmt: skip
            report.minify = minify_next(
                report.command, then, accuracy=accuracy, backend=backend, **common
            )
    return report
