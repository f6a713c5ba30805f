"""Triage over a Ray cluster of several nodes that loses one mid-triage (issue 62 item 5).

A local cluster started as Ray starts one (a head and two worker nodes, one CPU each:
``ray.cluster_utils.Cluster`` runs ``ray start`` for each); two scripts, one per worker
node; once both have started, one worker node is killed.  The script it ran is run
again on the other node: both get their verdict, each script finishes exactly once
(the killed node's run leaves no second "finished"), and the retried result says on
which nodes it ran.  Skipped where Ray is not installed (it is an optional extra)."""

import threading
import time

import pytest

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.slow]

SCRIPT = """
import os, time, torch
name = {name!r}
open(os.path.join({marks!r}, f"started-{{name}}-{{os.getpid()}}"), "w").close()
f = torch.compile(lambda x: x * 2 + 1, backend="eager")
f(torch.ones(3))
time.sleep({sleep})
open(os.path.join({marks!r}, f"finished-{{name}}-{{os.getpid()}}"), "w").close()
print("done")
"""


def test_a_node_lost_mid_triage_loses_nothing_and_finishes_nothing_twice(tmp_path):
    from ray.cluster_utils import Cluster

    from tcompile.repro.jobs.triage import TriageOptions, run_triage

    marks = tmp_path / "marks"
    marks.mkdir()
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name in ("a", "b"):
        (scripts / f"{name}.py").write_text(SCRIPT.format(name=name, marks=str(marks), sleep=12))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    killed: list[str] = []

    def kill_one_when_both_run() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            started = {p.name.split("-")[1] for p in marks.glob("started-*")}
            if started == {"a", "b"}:
                cluster.remove_node(workers[0], allow_graceful=False)
                killed.append("yes")
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_one_when_both_run, daemon=True)
    killer.start()
    try:
        options = TriageOptions(ray_address=cluster.address, out=str(tmp_path / "out"), timeout=300)
        report = run_triage([str(scripts)], options)
    finally:
        killer.join(timeout=5)
        ray.shutdown()
        cluster.shutdown()
    assert killed, "the two scripts never ran at once"
    verdicts = {r["path"].rsplit("/", 1)[-1]: r["verdict"] for r in report.scripts}
    assert verdicts == {"a.py": "clean", "b.py": "clean"}, report.scripts
    finished = sorted(p.name.split("-")[1] for p in marks.glob("finished-*"))
    assert finished == ["a", "b"], finished  # once each: nothing finished twice
    started = sorted(p.name.split("-")[1] for p in marks.glob("started-*"))
    assert len(started) == 3, started  # the lost node's script ran again elsewhere
    retried = [r for r in report.scripts if r.get("ray_attempts")]
    assert len(retried) == 1 and len(retried[0]["ray_attempts"]) == 2, report.scripts
    assert report.engine == "ray"
    for page in (report.page, report.html):  # and the pages say what the lost node cost
        assert "run 2 times on Ray, a node lost under it" in open(page).read(), page
