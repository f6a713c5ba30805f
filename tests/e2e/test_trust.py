"""Trust under bad input, interrupts and dying parents (issue 13): each test here
failed on the code before its fix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import FIXTURES, run_tcompile, tcompile_cmd


def test_relative_out_dir_repro_is_verified(tmp_path, monkeypatch):
    """Verification ran the repro by its relative path from another directory."""
    from tcompile.repro.verify import verify_repro

    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()
    repro = Path("rel") / "repro.py"
    repro.write_text("import sys\nprint('REPRODUCED: a/b: C')\nsys.exit(1)\n")
    assert verify_repro(repro, "a/b: C")


def test_run_dirs_are_absolute(tmp_path, monkeypatch):
    from tcompile.compiler.runner import new_run_dir

    monkeypatch.chdir(tmp_path)
    assert os.path.isabs(new_run_dir("out", "minify"))


def test_killed_tcompile_takes_its_program_with_it(tmp_path):
    """SIGKILL to tcompile: the program notices its parent is gone and exits."""
    script = tmp_path / "sleeper.py"
    pidfile = tmp_path / "pid"
    script.write_text(
        "import os, sys, time\n"
        f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen(
        [*tcompile_cmd(), "run", "--out", str(tmp_path / "out"), str(script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _until(lambda: pidfile.exists() and pidfile.read_text(), 60, "the program never started")
    child = int(pidfile.read_text())
    proc.kill()
    proc.wait()
    _until(lambda: not _alive(child), 10, "the program outlived tcompile")


def _until(ready, seconds: float, why: str, proc=None) -> None:
    """Wait for ``ready()``; fail with ``why`` after ``seconds`` (or once ``proc`` ended)."""
    deadline = time.monotonic() + seconds
    while not ready():
        assert time.monotonic() < deadline and (proc is None or proc.poll() is None), why
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_program_reading_stdin_gets_the_same_stdin_in_every_run(tmp_path):
    """The plain re-run got an empty stdin, passed, and the script's own error was
    reported as a compiler failure."""
    script = tmp_path / "reads_stdin.py"
    script.write_text(
        "import sys\n"
        "data = sys.stdin.read()\n"
        "if 'boom' in data:\n"
        "    raise ValueError('bad input line: ' + data.strip())\n"
        "print('ok')\n"
    )
    r = run_tcompile("run", "--json", "--out", str(tmp_path / "out"), str(script), stdin=b"boom\n")
    doc = json.loads(r.stdout)
    assert r.returncode == 3, r.stderr
    assert doc["verdict"] == "not-a-compiler-bug"


def test_closed_pipe_keeps_the_exit_code(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(
        "import torch\n"
        "print('\\n'.join(str(i) for i in range(3000)))\n"
        "f = torch.compile(lambda x: torch.relu(x) + 1, backend='relu_compile_error_TESTING_ONLY')\n"
        "f(torch.randn(4))\n"
    )
    shell = (
        f"{' '.join(tcompile_cmd())} run --out {tmp_path / 'out'} {script} 2>/dev/null | head -1;"
        " echo rc=${PIPESTATUS[0]}"
    )
    out = subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert "rc=1" in out.stdout, out.stdout


@pytest.mark.parametrize("reader", ["head -c 1", "head -1", "true"])
def test_a_closed_pipe_never_changes_a_clean_run_s_exit_code(tmp_path, reader):
    """rich exits 1 when stdout's reader is gone; tcompile's answer (0: no failure)
    stands however the reader stops."""
    script = tmp_path / "clean.py"
    script.write_text(
        "import torch\n"
        "print('\\n'.join(str(i) for i in range(3000)))\n"
        "print(torch.compile(lambda x: x.relu() + 1, backend='eager')(torch.randn(4)))\n"
    )
    shell = (
        f"{' '.join(tcompile_cmd())} run {script} 2>/dev/null | {reader} >/dev/null;"
        " echo rc=${PIPESTATUS[0]}"
    )
    out = subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert "rc=0" in out.stdout, out.stdout


@pytest.mark.slow
def test_missing_torch_api_is_an_internal_error_not_a_compiler_bug(tmp_path):
    script = tmp_path / "drift.py"
    script.write_text(
        "import torch\n"
        "del torch._TorchCompileInductorWrapper  # as if a future torch dropped it\n"
        "print(torch.compile(lambda x: x.relu() + 1)(torch.randn(4)))\n"
    )
    r = run_tcompile("run", "--out", str(tmp_path / "out"), str(script))
    assert r.returncode == 4, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("tcompile: internal error")]
    assert len(errors) == 1 and "torch 2." in errors[0]


def _record(tmp_path: Path, parts: dict, **meta) -> Path:
    import pickle

    import dill

    from tcompile.compiler import record_format as rec

    path = tmp_path / "record.pkl"
    payload = pickle.dumps({k: dill.dumps(v) for k, v in parts.items()})
    base = {"function": "f", "python": ".".join(map(str, sys.version_info[:3]))}
    rec.write_record(path, {**base, **meta}, payload)
    return path


def _code():
    def f(x):
        return x + 1

    return f.__code__


@pytest.mark.slow
def test_malformed_record_with_a_valid_checksum_is_exit_2(tmp_path):
    """The driver crashed on it, and replay said 'runs without a failure' (exit 0)."""
    for parts in ({"code": 42}, {"code": _code(), "compile": "inductor"}, {"module": 3}):
        path = _record(tmp_path, parts)
        r = run_tcompile("replay", "--out", str(tmp_path / "out"), str(path))
        assert r.returncode == 2, (parts, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("tcompile: error:")]
        assert lines and "malformed record" in lines[0], r.stderr
    # a foreign pickle as a part (a class of a module that is not here): exit 2 too
    import pickle

    from tcompile.compiler import record_format as rec

    path = tmp_path / "foreign.pkl"
    foreign = b"cno_such_module_here\nThing\n)R."
    import dill

    payload = pickle.dumps({"code": dill.dumps(_code()), "local:x": foreign})
    base = {"function": "f", "python": ".".join(map(str, sys.version_info[:3]))}
    rec.write_record(path, base, payload)
    r = run_tcompile("replay", "--trust", "--out", str(tmp_path / "out2"), str(path))
    assert r.returncode == 2 and "cannot restore" in r.stderr, r.stderr


@pytest.mark.slow
def test_replay_driver_failure_is_exit_4_never_no_failure(tmp_path):
    """An unexpected error of the driver itself (here: dill broken) is tcompile's failure."""
    path = _record(tmp_path, {"code": _code(), "local:x": 1})
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "dill.py").write_text("raise RuntimeError('dill is broken here')\n")
    r = run_tcompile(
        "replay", "--out", str(tmp_path / "out"), str(path), env={"PYTHONPATH": str(broken)}
    )
    assert r.returncode == 4, r.stderr
    assert "dill is broken here" in r.stderr


def _wait_for(path: Path, text: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never showed in {path}")


@pytest.mark.slow
def test_sigterm_during_minify_keeps_the_best_graph(tmp_path):
    err = tmp_path / "stderr.txt"
    with open(err, "w") as e:
        proc = subprocess.Popen(
            [
                *tcompile_cmd(),
                "minify",
                "--json",
                "--accuracy",
                "--out",
                str(tmp_path / "out"),
                str(FIXTURES / "block_accuracy.py"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=e,
            text=True,
        )
        _wait_for(err, "nodes after")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=600)
    doc = json.loads(out)
    assert doc["interrupted"] is True and proc.returncode == 130, err.read_text()[-2000:]
    assert os.path.isfile(doc["repro"])
    saved = json.loads((Path(doc["run_dir"]) / "minify.json").read_text())
    assert saved["interrupted"] is True
    # every repro.py tcompile writes runs: it reproduces or not, it never errors (exit 2)
    run = subprocess.run(
        [sys.executable, doc["repro"]],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode in (0, 1), run.stdout + run.stderr


@pytest.mark.slow
def test_sigterm_during_bisect_reports_the_narrowest_range(tmp_path):
    err = tmp_path / "stderr.txt"
    with open(err, "w") as e:
        proc = subprocess.Popen(
            [
                *tcompile_cmd(),
                "bisect",
                "--json",
                "--whole-program",  # the program bisect: a probe is a run (from the
                "--out",  # saved graph there is no run 4: capture_bisect.py)
                str(tmp_path / "out"),
                str(FIXTURES / "cpp_relu_compile_error.py"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=e,
            text=True,
        )
        _wait_for(err, "run 4:")  # a few probes inside the stage
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
    doc = json.loads(out)
    assert doc["interrupted"] is True and proc.returncode == 130, err.read_text()[-2000:]
    assert doc["stage"] == "inductor" and doc["candidates"]
    assert doc["message"].startswith("INTERRUPTED")


@pytest.mark.extended
def test_sigterm_during_the_capture_bisect_reports_the_narrowest_range(tmp_path):
    """The same from the saved graph: the range is of that graph's applications."""
    err = tmp_path / "stderr.txt"
    with open(err, "w") as e:
        proc = subprocess.Popen(
            [*tcompile_cmd(), "bisect", "--json", "--out", str(tmp_path / "out"),
             str(FIXTURES / "cpp_relu_compile_error.py")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=e, text=True,
        )  # fmt: skip
        _wait_for(err, "captured graph 0: enable")  # inside the stage, on the graph
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
    doc = json.loads(out)
    assert doc["interrupted"] is True and proc.returncode == 130, err.read_text()[-2000:]
    assert doc["stage"] == "inductor" and doc["candidates"]


def test_every_attribute_a_repro_reads_is_defined():
    """An interrupted minify kept a graph with tensor constants (get_attr nodes) and the
    repro died: 'Repro' object has no attribute '_tensor_constant0'."""
    import torch
    import torch.fx as fx

    from tcompile.repro.inputs import build, compact_source, spec_of
    from tcompile.repro.module import module_source

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(3))
            self.register_buffer("scale", torch.full((3,), 2.0))

        def forward(self, x):
            return x * self.weight + self.scale + torch.tensor([1.0, 2.0, 3.0])

    gm = fx.symbolic_trace(M())
    gm._tensor_constant0 = torch.tensor([1.0, 2.0, 3.0])
    g = gm.graph
    with g.inserting_before(next(iter(n for n in g.nodes if n.op == "output"))):
        const = g.get_attr("_tensor_constant0")
    out = next(n for n in g.nodes if n.op == "output")
    out.args = ((out.args[0], const),)
    gm.recompile()
    for real in (False, True):
        src, imports = module_source(gm, real=real, sidecar=[])
        ns = {"torch": torch}
        exec("\n".join(imports) + "\n" + src + "\n" + compact_source([spec_of(torch.randn(3))]), ns)
        mod = ns["Repro"]()
        outs = mod(*ns["make_inputs"]())
        assert len(outs) == 2 and outs[1].shape == (3,)
        if real:
            assert torch.equal(outs[1], gm._tensor_constant0)
    del build


def test_untested_torch_gets_one_warning(monkeypatch):
    from importlib import metadata

    from tcompile.compiler import stack

    monkeypatch.setattr(metadata, "version", lambda name: "2.99.0+cpu")
    warning = stack.torch_version_warning()
    assert warning and "2.99.0" in warning and "\n" not in warning
    monkeypatch.setattr(metadata, "version", lambda name: "2.13.0+cpu")
    assert stack.torch_version_warning() is None


def test_interrupt_while_verifying_keeps_the_repro_as_not_verified(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM while a finished repro is being checked: repro.py stays (and
    parses), and it is reported as not verified -- never as verified, never missing."""
    import torch

    from tcompile.repro import artifacts

    def relu_twice(x):
        return torch.relu(x) * 2

    from tcompile.compiler.signature import FailureSignature

    gm = torch.fx.symbolic_trace(relu_twice)

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(artifacts, "check_repro", interrupted)
    art = artifacts.write_verified(
        tmp_path,
        gm=gm,
        inputs=[torch.randn(4)],
        shrunk=None,
        signature=FailureSignature("inductor", "compile", "RuntimeError", "boom"),
        accuracy="off",
        meta={"stage": "inductor", "level": "dynamo", "graph_kind": "inference"},
    )
    assert art.interrupted and not art.verified
    text = (tmp_path / "repro.py").read_text()
    compile(text, "repro.py", "exec")
    assert "relu" in text


def _run_processes(under: Path) -> list[int]:
    """Processes whose run token (TCOMPILE_RUN) lies under ``under``."""
    needle = f"TCOMPILE_RUN={under}".encode()
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read() and _alive(int(pid)):
                    found.append(int(pid))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_killed_tcompile_takes_its_minifier_workers_with_it(tmp_path):
    """SIGKILL to tcompile while minify's workers (paused copies of the program) are up:
    every one of them exits too."""
    proc = subprocess.Popen(
        [
            *tcompile_cmd(),
            "minify",
            "--out",
            str(tmp_path),
            str(FIXTURES / "cpp_relu_compile_error.py"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _until(lambda: _run_processes(tmp_path), 120, "no worker started", proc)
    time.sleep(3)
    assert _run_processes(tmp_path)
    proc.kill()
    proc.wait()
    _until(lambda: not _run_processes(tmp_path), 10, "a worker outlived tcompile")


def test_sigkill_of_tcompile_while_verifying_takes_the_repro_with_it(tmp_path):
    """A repro that hangs (and the process it starts) must not outlive tcompile, even
    when tcompile is killed with SIGKILL while verifying it."""
    pids = tmp_path / "pids"
    repro = tmp_path / "repro.py"
    repro.write_text(
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(600)\n"
    )
    verifier = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from pathlib import Path; from tcompile.repro.verify import repro_output; "
            f"repro_output(Path({str(repro)!r}))",
        ],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (pids.exists() and len(pids.read_text().split()) == 2):
        assert time.monotonic() < deadline, "the repro never started"
        time.sleep(0.1)
    started = [int(p) for p in pids.read_text().split()]
    verifier.send_signal(signal.SIGKILL)
    verifier.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in started):
        assert time.monotonic() < deadline, f"still running after tcompile died: {started}"
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
