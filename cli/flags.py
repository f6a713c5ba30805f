"""Each command's options as one typed record (issue 60: options travel as records).

click passes a command's options by name; ``app.flags(CLS)`` hands the command
``CLS(**them)``, one value, instead of a dozen parameters.  Fields are the options'
names as click gives them (``--json`` is ``as_json``, SCRIPT [ARGS] is ``argv``).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class RunFlags:
    """`tcompile run`'s options."""

    backend: str | None
    accuracy: str
    timeout: float | None
    as_json: bool
    out: str | None
    debug_dir: str | None
    only: str | None
    trace: str | None
    record_all: bool
    localize: bool
    without: tuple[str, ...]
    capture: bool
    argv: tuple[str, ...]


@dataclasses.dataclass
class BisectFlags:
    """`tcompile bisect`'s options."""

    accuracy: str
    match: str | None
    timeout: float | None
    jobs: int
    repeat: int | None
    then_minify: bool
    peers: str | None
    guided: bool
    confirm: bool | None
    whole_program: bool
    write_report: bool
    as_json: bool
    out: str | None
    argv: tuple[str, ...]


@dataclasses.dataclass
class MinifyFlags:
    """`tcompile minify`'s options."""

    after: str
    accuracy: str
    backend: str | None
    graph: int | None
    match: str | None
    jobs: int
    timeout: float | None
    real_inputs: bool
    level: str
    include: tuple[str, ...]
    max_time: float | None
    trust: bool
    write_report: bool
    as_json: bool
    out: str | None
    argv: tuple[str, ...]


@dataclasses.dataclass
class ReplayFlags:
    """`tcompile replay`'s options."""

    backend: str | None
    no_fullgraph: bool
    accuracy: str
    info: bool
    trust: bool
    then_minify: bool
    timeout: float | None
    as_json: bool
    out: str | None
    record: str


@dataclasses.dataclass
class ReportFlags:
    """`tcompile report`'s options."""

    accuracy: str
    timeout: float | None
    jobs: int
    max_bugs: int
    level: str
    trace: str | None
    confirm: bool | None
    max_time: float | None
    baseline: str | None
    as_json: bool
    out: str | None
    argv: tuple[str, ...]


@dataclasses.dataclass
class TriageFlags:
    """`tcompile triage`'s options."""

    accuracy: str
    timeout: float
    jobs: int
    per_gpu: int
    repeat: int | None
    each: bool
    max_time: float
    also: tuple[str, ...]
    ray_address: str | None
    as_json: bool
    out: str
    paths: tuple[str, ...]
