"""Two GPUs, NCCL (issue 37): DDP (both wrappings), tensor parallel (functional
collectives) and FSDP2 (``fully_shard`` + ``block.compile()``) under
``torchrun --nproc-per-node 2``, each with a bug on every rank and on rank 1 only.
``run --accuracy`` ties every failure to its graph and rank; ``bisect`` names the culprit
and the rank; ``minify`` gives a verified repro.py.

Skipped with fewer than two GPUs (CI has none): run on the device's two-GPU kind with
``pytest -m gpu tests/gpu/test_multi_gpu.py``; results in docs/torchrun.md.
"""

import json

import pytest
import torch

from helpers import FIXTURES, run_tcompile

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs"
    ),
]


def _torchrun(fixture, *args):
    return ["--", "torchrun", "--nproc-per-node", "2", str(FIXTURES / fixture), *args]


def _json(command, *args, tmp_path, timeout=600):
    r = run_tcompile(command, "--json", "--out", str(tmp_path / command), *args, timeout=timeout)
    assert "Traceback (most recent call last)" not in r.stdout, r.stdout[-3000:]
    try:
        return r, json.loads(r.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"exit {r.returncode}: {r.stderr[-3000:]}") from None


# (fixture and its arguments, the ranks that fail, the kind of failure)
CASES = [
    (("ddp_rank1_bug.py",), {1}, "accuracy"),
    (("ddp_device_ids_rank1.py",), {1}, "accuracy"),
    (("ddp_every_rank_bug.py",), {0, 1}, "compile"),
    (("tp_rowparallel_relu.py",), {0, 1}, "accuracy"),
    (("tp_rowparallel_relu.py", "--only-rank", "1"), {1}, "accuracy"),
    (("fsdp2_block_compile.py",), {0, 1}, "accuracy"),
    (("fsdp2_block_compile.py", "--only-rank", "1"), {1}, "accuracy"),
]


@pytest.mark.parametrize(
    ("job", "ranks", "kind"), CASES, ids=lambda v: "-".join(v) if isinstance(v, tuple) else None
)
def test_run_ties_every_failure_to_a_graph_and_its_rank(job, ranks, kind, tmp_path):
    r, doc = _json("run", "--accuracy", *_torchrun(*job), tmp_path=tmp_path)
    assert r.returncode == 1, doc.get("explanation")
    assert not [n for n in doc["notes"] if "could not run" in n["text"]], doc["notes"]
    assert {f["rank"] for f in doc["failures"]} == ranks, doc["failures"]
    assert all(f["graph"] is not None and f["kind"] == kind for f in doc["failures"])
    one = "rank 1 only (of 2)" if ranks == {1} else "all 2 ranks"
    assert doc["ranks"].startswith(one), doc["ranks"]


def test_a_job_that_compiles_nothing_says_so(tmp_path):
    r, doc = _json("run", *_torchrun("ddp_compiled_outside.py"), tmp_path=tmp_path)
    assert r.returncode == 0 and doc["graphs"] == []
    assert [n for n in doc["notes"] if "no graph was compiled" in n["text"]], doc["notes"]


@pytest.mark.parametrize(
    "job", [("ddp_rank1_bug.py",), ("tp_rowparallel_relu.py", "--only-rank", "1")], ids=str
)
def test_bisect_names_the_culprit_and_the_rank(job, tmp_path):
    r, doc = _json("bisect", "--accuracy", *_torchrun(*job), tmp_path=tmp_path)
    assert r.returncode == 1, doc.get("message")
    assert doc["rank"] == 1 and doc["graph"] == 0, doc
    assert (doc["stage"], doc["subsystem"]) == ("inductor", "lowerings") and "relu" in doc["detail"]


@pytest.mark.parametrize(
    ("job", "rank"),
    [
        (("tp_rowparallel_relu.py", "--only-rank", "1"), 1),
        (("tp_partials_cancel.py", "--only-rank", "1"), 1),
        (("fsdp2_block_compile.py", "--only-rank", "1"), 1),
        # every rank fails: the first failing rank's graph (rank 0 on the CPU)
        (("tp_rowparallel_relu.py",), None),
        (("fsdp2_block_compile.py",), None),
        (("ddp_every_rank_bug.py",), None),
    ],
    ids=str,
)
def test_minify_gives_a_verified_repro(job, rank, tmp_path):
    r, doc = _json("minify", "--accuracy", *_torchrun(*job), tmp_path=tmp_path)
    assert r.returncode == 1 and doc.get("verified"), (doc, r.stderr[-3000:])
    assert doc["rank"] in ({rank} if rank is not None else {0, 1}), doc
    assert "relu" in doc["ops"], doc
    assert "relu" in open(doc["repro"]).read()
