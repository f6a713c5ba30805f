"""Issue 62, item 1: a script's classification run is its report's baseline, and a
membership check is answered on the graph that run saved -- no second baseline, no run
of the program for a check.

``tcompile run --capture`` saves the failing graph with its failing call's inputs and
counts inductor's applications, as report's first run does; ``report --baseline`` starts
from it; ``capture_check`` compiles the saved graph as it is and with a switch off."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow

SCRIPT = FIXTURES / "cpp_relu_compile_error.py"  # relu's C++ lowering fails to compile


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    out = tmp_path_factory.mktemp("capture")
    r = run_tcompile("run", "--json", "--capture", "--out", str(out / "run"), str(SCRIPT))
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["captured"], r.stderr[-2000:]
    return out, doc


def test_run_capture_saves_the_failing_graph(captured):
    _, doc = captured
    (fail,) = doc["failures"]
    from pathlib import Path

    cap = Path(doc["run_dir"]) / "captures" / f"graph-{fail['graph']}"
    assert (cap / "graph.pt").is_file() and (cap / "capture.json").is_file()


def test_report_from_the_baseline_runs_no_baseline_of_its_own(captured):
    out, doc = captured
    r = run_tcompile(
        "report", "--json", "--baseline", doc["run_dir"], "--out", str(out / "report"), str(SCRIPT)
    )
    rep = json.loads(r.stdout)
    assert r.returncode == 1, r.stderr[-2000:]
    assert "the program is not run first" in r.stderr
    (bug,) = rep["bugs"]
    bis = bug["bisect"]
    assert bis["without"] == "lowerings:relu", bis["message"]
    first = bis["steps"][0]
    assert first["run"] == 0 and "shared" in first["what"]  # the run's, not a new one
    assert bug["minify"]["verified"]


def test_a_baseline_of_another_command_is_a_usage_error(captured, tmp_path):
    _, doc = captured
    other = FIXTURES / "cpp_relu_accuracy.py"
    r = run_tcompile("report", "--baseline", doc["run_dir"], "--out", str(tmp_path), str(other))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--baseline" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_tcompile("report", "--baseline", str(tmp_path), "--out", str(tmp_path), str(SCRIPT))
    assert r.returncode == 2 and "no run's result there" in r.stderr, r.stderr
    r = run_tcompile(
        "report", "--baseline", doc["run_dir"], "--trace", str(tmp_path / "t"), str(SCRIPT)
    )
    assert r.returncode == 2 and "--trace" in r.stderr and "Traceback" not in r.stderr


def test_membership_on_the_captured_graph(captured):
    """The culprit's switch off makes the saved graph pass (member); another lowering's
    does not (no); each answer from two compiles of the graph, the program not run."""
    _, doc = captured

    def check(*words):
        argv = [a for w in words for a in ("--without", w)]
        proc = subprocess.run(
            [sys.executable, "-m", "tcompile.repro.jobs.capture_check", doc["run_dir"], *argv],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    got = check("lowerings:relu")
    assert got["answer"] == "member" and got["unchanged"] == "same_failure" and got["off"] == "pass"
    got = check("lowerings:add")  # one compile: it still fails with that switch off
    assert got["answer"] == "no" and got["off"] == "same_failure" and got["unchanged"] is None


def test_the_confirmation_runs_the_program_with_its_own_backends(tmp_path):
    """#174459's shape: one function compiled with backend="eager" (graph 0) and with
    inductor (graph 1).  The culprit found on graph 1's capture is confirmed by a run
    with the program's own backends: ``--backend inductor`` compiled graph 0 with
    inductor too, Dynamo reused it for the inductor call, the switch scoped to graph 1
    missed it, and the program bisect ran (5 runs; now 2)."""
    script = FIXTURES / "two_backends_relu.py"
    r = run_tcompile("bisect", "--json", "--accuracy", "--out", str(tmp_path), str(script))
    doc = json.loads(r.stdout)
    assert r.returncode == 1, r.stderr[-2000:]
    assert doc["from_capture"] and doc["fallback"] is None, doc["fallback"]
    assert doc["runs"] == 2 and doc["graph"] == 1 and doc["without"] == "lowerings:relu"
    assert "the whole program passes with the culprit off" in doc["message"]


def test_a_check_server_judges_two_scripts_captures_on_one_worker(captured, tmp_path):
    """``capture_check --serve``: a line in, its answer a line out.  The worker started
    for one tracker script's capture (argreduce #193492: a wrong value) judges
    another's (cumsum #189518: a wrong dtype) when told its failure, and answers as a
    fresh worker would; a capture made under its own inductor configuration (the planted relu bug)
    gets a fresh worker."""
    _, doc = captured
    runs = []
    for name in ("dupes/argreduce_index_193492.py", "families/cumsum_189518.py"):
        out = str(tmp_path / Path(name).stem)
        r = run_tcompile("run", "--json", "--capture", "--accuracy", "--out", out,
                         str(FIXTURES / name))  # fmt: skip
        runs.append(json.loads(r.stdout))
        assert r.returncode == 1 and runs[-1]["captured"], r.stderr[-2000:]
    work = tmp_path / "server"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tcompile.repro.jobs.capture_check", "--serve", str(work)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip

    def ask(run_dir, *tries):
        proc.stdin.write(json.dumps({"run_dir": run_dir, "tries": [[t, None] for t in tries]}))
        proc.stdin.write("\n")
        proc.stdin.flush()
        return [(a["without"], a["answer"]) for a in json.loads(proc.stdout.readline())["answers"]]

    cast, argmax = "lowerings:convert_element_type", "lowerings:argmax"
    cumsum = "pattern:post_grad.pointless_cumsum_replacement"
    try:
        assert ask(runs[0]["run_dir"], cast, argmax) == [(cast, "no"), (argmax, "member")]
        assert ask(runs[1]["run_dir"], argmax, cumsum) == [(argmax, "no"), (cumsum, "member")]
        assert [p.name for p in work.glob("pool-*")] == ["pool-1"]  # one worker for both
        assert ask(doc["run_dir"], "lowerings:relu") == [("lowerings:relu", "member")]
        assert sorted(p.name for p in work.glob("pool-*")) == ["pool-1", "pool-2"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
