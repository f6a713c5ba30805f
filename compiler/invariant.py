"""The invariant every verdict keeps: tcompile never reports a program clean (exit 0, no
failure) when a process of it -- the command, or any rank of a launched job -- ended
otherwise than plain python ends it, unless the difference is one of the exceptions
docs/faithful.md names and the output says which.

Its one named exception that reaches a clean verdict: **a rank that hangs in its
backend's teardown** (gloo's destructor as ``main()`` returns, or at interpreter exit)
after every rank destroyed its process group and none raised, each rank having said its
code returned or found stuck at its end (blocked, no frame of the program's running but
its module's) -- tcompile ends it and says so in a note (runner.py).  A rank whose code
raised or exited with a failing status is never read as such a hang.

Checked at the end of every run tcompile classifies (classify.py) and again where a
command turns its report into an exit code (cli/app.py): a violation is tcompile's own
error (exit 4), never a verdict.  Each rank's ending is also in ``--json``
(``ranks_ended``), so a person can check it.
"""

from __future__ import annotations

from typing import Any

from .protocol import Event

RETURNED = "returned"
# alive, blocked, no frame of the program's running but its module's: at its end
# (runner.stuck_at_end: how gloo's destructor hangs as main() returns)
STUCK = "stuck at its end"


def rank_endings(
    events: list[dict[str, Any]], stuck: list[Any] | None = None
) -> list[dict[str, Any]]:
    """How each rank's code ended, from its events: ``returned``, ``raised <Type:
    message>``, ``exit <status>``, ``stuck at its end`` (``stuck``: the pids tcompile
    found so before ending them), or ``no exit seen`` (killed, or still running when the
    job was ended); sorted by rank.  Empty for a program that is not a launched job."""
    ranks: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e.get("rank") is None:
            continue
        pid = e.get("pid")
        row = ranks.setdefault(
            pid, {"rank": e["rank"], "pid": pid, "ended": "no exit seen", "group_destroyed": False}
        )
        kind = e.get("event")
        if kind == Event.GROUP_DESTROYED:
            row["group_destroyed"] = True
        elif kind == Event.EXCEPTION and row["ended"] == "no exit seen":
            row["ended"] = "raised " + str(e.get("signature_text") or "an exception")
        elif kind == Event.EXIT:
            if e.get("raised"):
                row["ended"] = f"raised {e['raised']}"
            elif e.get("code") not in (0, None):
                row["ended"] = f"exit {e.get('code')}"
            else:
                row["ended"] = RETURNED
    for row in ranks.values():
        if row["ended"] == "no exit seen" and row["pid"] in (stuck or []):
            row["ended"] = STUCK
    return sorted(ranks.values(), key=lambda r: (int(r["rank"]), str(r["pid"])))


def contradiction(
    returncode: int | None, timed_out: bool, teardown_hang: bool, endings: list[dict[str, Any]]
) -> str | None:
    """Why reporting this run clean would contradict what its processes did; None when
    it would not.  ``returncode``: the command's own status (``0`` after a teardown hang
    tcompile ended); ``endings``: rank_endings."""
    if timed_out:
        return "the command ran past its time limit"
    if teardown_hang:
        failed = [r for r in endings if r["ended"] not in (RETURNED, STUCK)]
        if failed or not endings:
            said = "; ".join(f"rank {r['rank']} {r['ended']}" for r in failed) or "no rank said"
            return f"tcompile ended the job as a hang at teardown, but {said}"
        return None
    if returncode not in (0, None):  # None: not known here (a merge of result files)
        return f"the command exited with status {returncode}"
    return None


def check_clean(
    returncode: int | None, timed_out: bool, teardown_hang: bool, endings: list[dict[str, Any]]
) -> None:
    """Raise tcompile's InternalError where a clean verdict would contradict the run."""
    why = contradiction(returncode, timed_out, teardown_hang, endings)
    if why is not None:
        from .exitcodes import InternalError

        raise InternalError(
            f"tcompile would report the program clean, but {why} (a bug of tcompile's: "
            "the verdict must never contradict what the processes did)"
        )
