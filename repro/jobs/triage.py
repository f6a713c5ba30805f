"""``tcompile triage``: a folder of bug scripts to verdicts, culprits, verified repros
and clusters of duplicates.

Each script is one task (triage_one.py) -- tcompile's own commands in child
interpreters -- run by an existing engine: a local pool (``jobs`` at a time, a GPU
each where the machine has them) or Ray (``ray_address``: one task per script with
its resource request).  No scheduler of our own.

Resumable and incremental: a result is kept in ``OUT/cache/KEY.json`` as soon as its
script is done, KEY hashing the script's bytes (and its local modules'), the torch
and tcompile versions and the options; a rerun (after Ctrl-C, or with new scripts)
does only what is not there.  Clusters (triage_cluster.py) and the pages
(triage_page.py) are made from the results every time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import queue
import shutil
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from tcompile import __version__
from tcompile.compiler import layout
from tcompile.compiler.accuracy import AccuracyMode
from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.runner import write_json
from tcompile.repro.triage_cluster import cluster, culprit_of, minimal_of
from tcompile.repro.triage_page import write_pages
from tcompile.repro.triage_records import Cluster, ScriptResult
from tcompile.repro.triage_verdict import TriageVerdict as Verdict

from .triage_capture import close_servers
from .triage_loop import (
    BUDGETS,
    Scheduler,
    attach_members,
    is_final,
    merge_reps,
    reset_orphans,
    stale,
)
from .triage_one import Interrupted, start, stop_all
from .triage_one import also as repro_under

DEFAULT_OUT = "tcompile-triage"
_SKIP = {"__init__.py", "setup.py", "conftest.py"}


@dataclasses.dataclass
class TriageReport:
    exit_code: int
    message: str
    scripts: list[ScriptResult]
    clusters: list[Cluster]
    counts: dict[str, int]
    out: str
    page: str | None = None
    html: str | None = None
    torch: str | None = None
    engine: str = "local"
    seconds: float = 0.0
    done_now: int = 0
    from_cache: int = 0
    interrupted: bool = False
    reports: int = 0  # scripts bisected and minified (once per cluster, or --each: all)
    joined_by_check: int = 0  # scripts that joined a cluster by a check, no report

    def to_json(self) -> dict[str, Any]:
        """``--json``'s document (and the pages'), written from the records: each script
        as the pages show it -- every step that did not finish (killed at the script's
        budget, no exit status) named in ``unfinished``, never read as an answer (issue
        64)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["scripts"] = [r.to_json(public=True) for r in self.scripts]
        out["clusters"] = [c.to_json() for c in self.clusters]
        return out


def discover(paths: list[str]) -> list[Path]:
    """The scripts under ``paths``: files as given; in a folder every ``*.py`` (sorted,
    recursively) except packages' modules and the modules a script there imports (a
    project: its scripts, not its library)."""
    found: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_file():
            found.append(path.resolve())
        elif path.is_dir():
            files = sorted(
                f for f in path.rglob("*.py") if f.name not in _SKIP and not _in_package(f, path)
            )
            imported = {m for f in files for m in _local_imports(f)}
            found += [f.resolve() for f in files if f.resolve() not in imported]
        else:
            raise UsageError(f"no such file or directory: {p}")
    unique = list(dict.fromkeys(found))
    if not unique:
        raise UsageError(f"no Python scripts under {' '.join(paths)}")
    return unique


def _local_imports(script: Path) -> list[Path]:
    """The program's own modules ``script`` imports (repro/program_files.py: modules
    beside it, packages, a src/ layout's), and theirs in turn."""
    from tcompile.repro.program_files import local_modules
    from tcompile.repro.project import entry_of

    try:
        entry = entry_of([sys.executable, str(script)])
        return local_modules(entry.script, list(entry.roots), "", entry.project)
    except (UsageError, OSError, ValueError):
        return []


def _in_package(path: Path, root: Path) -> bool:
    """A module of a package below ``root`` (its folder has an ``__init__.py``): not
    a script (the folder given may be a package itself: its files are scripts)."""
    return path.parent != root and (path.parent / "__init__.py").is_file()


def torch_version(python: str | None = None) -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def script_key(script: Path, options: dict[str, Any]) -> str:
    """What a cached result depends on: the script's bytes and its local modules', the
    torch and tcompile versions, the options that change a verdict (not the budgets)."""
    options = {k: v for k, v in options.items() if k not in BUDGETS}
    h = hashlib.sha256()
    for f in [script, *sorted(_local_imports(script))]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(
        json.dumps(
            {"torch": torch_version(), "tcompile": __version__, **options}, sort_keys=True
        ).encode()
    )
    return h.hexdigest()[:16]


def _wants_gpu(script: Path) -> bool:
    text = script.read_text(errors="replace")
    return "cuda" in text or "triton" in text


def _interpreters(also: str | list[str] | None) -> list[str]:
    """--also's interpreters; one that is not there is bad input."""
    alsos = [also] if isinstance(also, str) else list(also or [])
    for python in alsos:
        if not shutil.which(python) and not Path(python).is_file():
            raise UsageError(f"--also {python}: no such interpreter")
    return alsos


@dataclasses.dataclass
class TriageOptions:
    """What ``tcompile triage`` is asked (its options, typed once).  The budgets --
    ``timeout``, ``jobs``, ``per_gpu``, ``max_time`` -- never decide a cached result."""

    accuracy: str = AccuracyMode.LOOSE.value
    timeout: float = 900.0
    jobs: int = 1
    per_gpu: int = 1
    repeat: int | None = None
    each: bool = False  # every script bisected and minified (not once per cluster)
    max_time: float = 150.0
    also: str | list[str] | None = None  # other interpreters each repro is run under
    ray_address: str | None = None
    out: str | None = None
    observer: Observer | None = None


def run_triage(paths: list[str], o: TriageOptions) -> TriageReport:
    """``tcompile triage``: every script's verdict, its culprit, clusters, repros."""
    accuracy, timeout, jobs, per_gpu, repeat, each = (
        o.accuracy,
        o.timeout,
        o.jobs,
        o.per_gpu,
        o.repeat,
        o.each,
    )
    max_time, also, ray_address, out = o.max_time, o.also, o.ray_address, o.out
    observer = o.observer or NullObserver()
    t0 = time.monotonic()
    scripts = discover(paths)
    alsos = _interpreters(also)
    base = Path(out or DEFAULT_OUT).absolute()
    try:
        (base / layout.TRIAGE_CACHE).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {base}: {exc.strerror or exc}") from None
    # one run per script: the second sample is the report's run (a representative) or
    # the membership check's run as it is (a member); --each: two runs, as before
    repeat = repeat or (2 if each else 1)
    # what a result depends on (--also is not: it is asked of each result afterwards)
    options = {"accuracy": accuracy, "timeout": timeout, "repeat": repeat, "each": each,
               "max_time": max_time}  # fmt: skip
    tasks, results = _plan(scripts, base, options)
    reset_orphans(results)
    from_cache = sum(1 for r in results.values() if is_final(r))
    observer.status(
        f"triage: {len(scripts)} scripts, {from_cache} already done,"
        f" {len(scripts) - from_cache} to do"
        + (" (each bisected and minified)" if each else " (bisect and minify once per cluster)")
    )

    def done(path: str, res: ScriptResult, quiet: bool = False) -> None:
        task = tasks[path]
        res.path, res.key, res.cached = path, task["key"], False
        res.budgets = {k: task.get(k) for k in ("timeout", "max_time")}  # what it ran under
        write_json(base / layout.TRIAGE_CACHE / f"{task['key']}.json", res.to_json())
        results[path] = res
        if quiet or not is_final(res):
            return  # a failing script's runs: its report or membership comes next
        said = f"joined {Path(res.member_of).name}" if res.member_of else ""
        final = sum(1 for r in results.values() if is_final(r))
        observer.status(
            f"triage: [{final}/{len(scripts)}] {Path(path).name}: {res.verdict}"
            f" {said or res.message[:80]} ({res.seconds:.0f}s)"
        )

    interrupted = False
    start()
    try:
        with _engine(ray_address, jobs, per_gpu, base) as (submit, slots):
            Scheduler(
                tasks, results, submit=submit, done=done, slots=slots, base=base, each=each,
                early=ray_address is None, observer=observer,
            ).run()  # fmt: skip
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
    ordered = [results[str(s)] for s in scripts if str(s) in results]
    for r in ordered:
        _place_repro(base, r)
    for python in alsos if not interrupted else []:
        interrupted = _also_all(base, ordered, python, jobs, timeout, observer) or interrupted
    ordered, clusters, interrupted = _clusters(
        base, ordered, each=each, interrupted=interrupted, jobs=jobs, timeout=timeout,
        observer=observer,
    )  # fmt: skip
    counts = {v.value: sum(r.verdict == v for r in ordered) for v in Verdict}
    code, msg = _outcome(counts, len(clusters), len(ordered), len(scripts), interrupted)
    report = TriageReport(
        int(code),
        msg,
        ordered,
        clusters,
        counts,
        str(base),
        torch=torch_version(),
        engine="ray" if ray_address else "local",
        seconds=round(time.monotonic() - t0, 2),
        done_now=len(ordered) - from_cache,
        from_cache=from_cache,
        interrupted=interrupted,
        reports=sum(1 for r in ordered if r.reported),
        joined_by_check=sum(1 for r in ordered if r.member_of),
    )
    report.message += _how_many(report)
    report.page, report.html = write_pages(base, report.to_json())
    write_json(base / layout.TRIAGE_JSON, report.to_json())
    return report


def _how_many(report: TriageReport) -> str:
    if not report.joined_by_check:
        return ""
    return (
        f" ({report.reports} bisected and minified, {report.joined_by_check} joined their"
        " cluster by a check)"
    )


def _outcome(
    counts: dict[str, int], clusters: int, done: int, scripts: int, interrupted: bool
) -> tuple[ExitCode, str]:
    if interrupted:
        return ExitCode.INTERRUPTED, f"interrupted: {done} of {scripts} scripts done (kept)"
    if counts[Verdict.BUG] or counts[Verdict.FLAKY]:
        return (
            ExitCode.COMPILER_FAILURE,
            f"{counts['bug']} compiler bug(s) in {clusters} cluster(s) among {scripts} scripts",
        )
    if counts[Verdict.ERROR]:
        return ExitCode.INTERNAL, f"tcompile failed on {counts['error']} script(s)"
    return ExitCode.OK, f"no compiler bug among {scripts} scripts"


def _clusters(
    base: Path,
    ordered: list[ScriptResult],
    *,
    each: bool,
    interrupted: bool,
    jobs: int,
    timeout: float,
    observer: Observer,
) -> tuple[list[ScriptResult], list[Cluster], bool]:
    """The results shown (a script still on its way after an interrupt is not shown as a
    bug), the clusters, and whether interrupted."""
    for r in ordered:
        if r.raw_bug:
            r.culprit, r.minimal = culprit_of(r.raw_bug), minimal_of(r.raw_bug)
    if interrupted:
        ordered = [r for r in ordered if is_final(r)]
    reps = [r for r in ordered if not r.member_of]
    if each:  # every script reported: the reports' clusters, checked both ways
        clusters, interrupted = _checked(base, reps, interrupted, jobs, timeout, observer)
    else:  # the representatives' clusters, joined where checks said so; members into them
        clusters = merge_reps(cluster(reps), reps)
        attach_members(ordered, clusters)
    by_path = {r.path: r for r in ordered}
    for c in clusters:  # the representative's repro under each --also interpreter
        rep = by_path.get(c.representative)
        c.versions = [
            {"python": sys.executable, "torch": torch_version(), "result": "fails (this run)"},
            *((rep.also_all if rep else None) or {}).values(),
        ]
    return ordered, clusters, interrupted


def _checked(
    base: Path,
    ordered: list[ScriptResult],
    interrupted: bool,
    jobs: int,
    timeout: float,
    observer: Observer,
) -> tuple[list[Cluster], bool]:
    """The clusters the reports propose, checked by running (triage_switch.py)."""
    clusters = cluster(ordered)
    if interrupted or len(clusters) < 2:
        return clusters, interrupted
    from .triage_switch import merge

    observer.status("triage: do other clusters' culprits, turned off, explain each cluster?")
    try:
        return merge(base, ordered, clusters, jobs=jobs, timeout=timeout), False
    except KeyboardInterrupt:
        return clusters, True


def _also_all(
    base: Path,
    results: list[ScriptResult],
    python: str,
    jobs: int,
    timeout: float,
    observer: Observer,
) -> bool:
    """Each verified repro under ``python`` (another torch), once per interpreter: the
    answer is kept with the script's result.  True when interrupted."""
    todo = [r for r in results if r.repro and python not in (r.also_all or {})]
    observer.status(f"triage: {len(todo)} repro(s) under {python}")
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for r, answer in zip(
                todo, pool.map(lambda r: repro_under(python, r.repro or "", timeout), todo)
            ):
                # ``also``: the first interpreter's answer (as before); ``also_all``: each's
                r.also_all = {**(r.also_all or {}), python: answer}
                r.also = r.also or answer
                doc = {**r.to_json(), "cached": False}
                write_json(base / layout.TRIAGE_CACHE / f"{r.key}.json", doc)
    except KeyboardInterrupt:
        return True
    return False


def _place_repro(base: Path, r: ScriptResult) -> None:
    """The verified repro beside the pages: ``OUT/repros/STEM-KEY.py``."""
    text = r.repro_text
    if not text:
        r.repro = None
        return
    dest = base / layout.TRIAGE_REPROS / f"{Path(r.path).stem}-{(r.key or '')[:8]}.py"
    dest.parent.mkdir(exist_ok=True)
    if not dest.is_file() or dest.read_text() != text:
        layout.write_file(dest, text)
    r.repro = str(dest)


def _gpus() -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g for g in visible.split(",") if g.strip()]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 -- no torch or no CUDA: no GPUs
        return []


def _plan(
    scripts: list[Path], base: Path, options: dict[str, Any]
) -> tuple[dict[str, dict[str, Any]], dict[str, ScriptResult]]:
    """Every script's task, and what is cached of it already (results), by path."""
    tasks: dict[str, dict[str, Any]] = {}
    results: dict[str, ScriptResult] = {}
    for s in scripts:
        key = script_key(s, options)
        cached = base / layout.TRIAGE_CACHE / f"{key}.json"
        if cached.is_file():
            try:
                got = ScriptResult.from_json(json.loads(cached.read_text()))
                got.path, got.cached = str(s), True
                if not stale(got, options):
                    results[str(s)] = got
            except (ValueError, TypeError, AttributeError):
                cached.unlink()  # half a file from an older tcompile: do it again
        tasks[str(s)] = {
            "path": str(s),
            "args": [],
            "key": key,
            "work_dir": str(base / layout.TRIAGE_SCRIPTS / f"{s.stem}-{key[:8]}"),
            **options,
            "python": sys.executable,
            "gpu": _wants_gpu(s),
        }
    return tasks, results


@contextlib.contextmanager
def _engine(
    ray_address: str | None, jobs: int, per_gpu: int, base: Path
) -> Iterator[tuple[Any, int]]:
    """``(submit, slots)``: ``submit(fn, task, *args)`` runs one piece of a script's
    triage (triage_one's classify_one, report_one, check_one) on a local pool or Ray."""
    if ray_address:
        from .triage_ray import ray_engine

        with ray_engine(ray_address, base) as engine:
            yield engine
        return
    gpus: queue.Queue[str] = queue.Queue()
    for _ in range(max(1, per_gpu)):
        for g in _gpus():
            gpus.put(g)
    have_gpus = not gpus.empty()

    def one(fn: Any, task: dict[str, Any], *args: Any) -> Any:
        # with GPUs, each piece of a script that mentions CUDA holds one while it runs
        gpu = gpus.get() if have_gpus and task["gpu"] else None
        env = {"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {}
        try:
            # a slot's membership checks on captures go to its check server
            # (triage_capture.py), kept from one check to the next
            return fn({**task, "env": env, "check_servers": str(base / "check-servers")}, *args)
        finally:
            if gpu is not None:
                gpus.put(gpu)

    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        yield (lambda fn, task, *args: pool.submit(one, fn, task, *args)), max(1, jobs)
    except BaseException:
        stop_all()  # Ctrl-C: nothing queued starts, the running children stop now
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        close_servers()
