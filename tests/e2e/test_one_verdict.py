"""Issue 59: one verdict per program -- run, bisect, minify at every level and report
say the same of the same command line (triage's verdict for the user-bug folder is
tests/e2e/test_user_bugs.py's).

* the user's own data bug whose compiled kernel aborts where eager raises IndexError
  (token ids past the vocabulary): exit 3 everywhere -- ``run`` had said "1 compiler
  failure(s): crash" without ever running the program without torch.compile, and
  report.md had said the repro "passes with backend eager", which no run showed;
* a Dynamo bug on rank 1 of a torchrun job, checked after ``destroy_process_group``:
  exit 1 from ``run`` and ``minify --level program`` -- the program level had said exit
  3, comparing the launcher's ChildFailedError of the two runs.

Slow: about two minutes."""

from __future__ import annotations

import json

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow


def _verdict(tmp_path, name, *args, cwd=None, timeout=900):
    r = run_tcompile(*args[:1], "--json", "--out", str(tmp_path / name), *args[1:],
                     cwd=cwd, timeout=timeout)  # fmt: skip
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"], (name, r.stderr[-2000:])
    doc["_stderr"] = r.stderr  # the program's own output passes through
    return doc


def test_a_users_data_bug_that_aborts_compiled_code_is_exit_3_in_every_command(tmp_path):
    script = FIXTURES / "user_bugs" / "token_ids_past_vocab_abort.py"
    docs = {
        name: _verdict(tmp_path, name, *cmd, str(script), cwd=str(script.parent))
        for name, cmd in [
            ("run", ["run"]),
            ("bisect", ["bisect"]),
            ("minify", ["minify"]),
            ("program", ["minify", "--level", "program"]),
            ("report", ["report"]),
        ]
    }
    codes = {name: doc["exit_code"] for name, doc in docs.items()}
    assert set(codes.values()) == {3}, (codes, {n: d.get("message") for n, d in docs.items()})
    said = docs["run"]["explanation"]
    # the crash is named as the difference, in its own words: the C++ throw's what()
    # whenever the dying process printed one (two OpenMP threads throwing at once can
    # abort before the first one's what() line is written: seen in the suite under load)
    assert "SIGABRT" in said and "raised at" in said, said
    if "index out of bounds" in docs["run"]["_stderr"]:
        assert "index out of bounds" in said, said


# extended (2026-11-29: 68 s alone, 131 s in the suite): torchrun's run is
# tests/e2e/test_distributed.py's, the program level's minify nanoGPT's and test_minify_e2e's
@pytest.mark.extended
def test_a_torchrun_jobs_dynamo_bug_on_one_rank_is_exit_1_in_run_and_the_program_level(
    tmp_path,
):
    job = ["--", "torchrun", "--nproc-per-node", "2",
           str(FIXTURES / "ddp_side_effect_rank1_after_teardown.py")]  # fmt: skip
    run = _verdict(tmp_path, "run", "run", *job)
    mini = _verdict(tmp_path, "program", "minify", "--level", "program", "--max-time", "20", *job)
    assert run["exit_code"] == mini["exit_code"] == 1, (run["explanation"], mini["message"])
    assert "ChildFailedError" not in mini["message"], mini["message"]
