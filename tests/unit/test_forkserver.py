"""Candidates forked from a server that imported torch (compiler/forkserver.py): the
result of a forked run is what a fresh run gives -- exit status, the exception event
with its source line, the hook config applied, a timeout that kills."""

import sys

import pytest

from tcompile.compiler.forkserver import ForkServer
from tcompile.compiler.program import program_failure
from tcompile.compiler.protocol import HookConfig
from tcompile.compiler.runner import run_process


@pytest.fixture(scope="module")
def server():
    s = ForkServer()
    yield s
    s.close()


def _script(tmp_path, body):
    p = tmp_path / "prog.py"
    p.write_text(body)
    return p


def _both(server, tmp_path, path, argv=(), **config):
    forked = server.run(
        str(path),
        list(argv),
        HookConfig(dir=str(tmp_path / "f"), **config),
        timeout=60,
        cwd=str(tmp_path),
        extra_path=[],
    )
    with open("/dev/null", "w") as sink:
        fresh = run_process(
            [sys.executable, str(path), *argv],
            HookConfig(dir=str(tmp_path / "p"), **config),
            timeout=60,
            stdout=sink,
            stderr=sink,
            cwd=str(tmp_path),
        )
    return forked, fresh


def test_an_exception_is_the_same_failure_forked_and_fresh(server, tmp_path):
    path = _script(
        tmp_path,
        "import sys, torch\nassert __name__ == '__main__'\n"
        "if sys.argv[1:] == ['go']:\n    raise ValueError(f'bad {torch.ones(2).sum()}')\n",
    )
    forked, fresh = _both(server, tmp_path, path, ["go"], record="off")
    assert forked.returncode == fresh.returncode == 1
    a, b = program_failure(forked), program_failure(fresh)
    assert (
        a is not None
        and a.same(b)
        and a.line == b.line == "raise ValueError(f'bad {torch.ones(2).sum()}')"
    )
    forked, fresh = _both(server, tmp_path, path, ["stop"], record="off")
    assert forked.returncode == fresh.returncode == 0


def test_the_hook_config_reaches_the_fork(server, tmp_path):
    """disable=True: torch.compile hands the function back (the control run)."""
    path = _script(
        tmp_path,
        "import torch\nf = lambda x: x\nassert torch.compile(f) is f, 'compiled'\n",
    )
    forked, fresh = _both(server, tmp_path, path, disable=True)
    assert forked.returncode == fresh.returncode == 0


def test_a_candidate_past_its_time_is_killed(server, tmp_path):
    path = _script(tmp_path, "import time\ntime.sleep(60)\n")
    r = server.run(
        str(path),
        [],
        HookConfig(dir=str(tmp_path / "t")),
        timeout=2,
        cwd=str(tmp_path),
        extra_path=[],
    )
    assert r.timed_out and r.returncode < 0  # killed (by a signal), not left to finish


def test_a_pool_closed_under_a_running_candidate_stops_it(tmp_path):
    """The bisect decides whether probes fork in a thread beside the captured graph's
    judgements (probe.Bisector.decide_fork_aside); a bisect that ends first closes the
    pool under that run: the run ends as lost (RuntimeError), no server is left behind,
    and the pool takes no more runs."""
    import os
    import threading
    import time

    from tcompile.compiler.forkserver import ForkPool

    pool = ForkPool(1)
    server = pool._all[0]
    path = _script(tmp_path, "import time\ntime.sleep(60)\n")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            pool.run(str(path), [], HookConfig(dir=str(tmp_path / "c")), timeout=60,
                     cwd=str(tmp_path), extra_path=[])  # fmt: skip
        except (RuntimeError, OSError) as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.0)
    t0 = time.monotonic()
    pool.close()
    t.join(timeout=45)
    assert not t.is_alive() and errors, "the run did not end with the pool"
    assert time.monotonic() - t0 < 45
    assert server.proc.poll() is not None  # the busy server is gone too
    with pytest.raises(ProcessLookupError):
        os.kill(server.proc.pid, 0)
    with pytest.raises(RuntimeError):
        pool.run(str(path), [], HookConfig(dir=str(tmp_path / "d")), timeout=5,
                 cwd=str(tmp_path), extra_path=[])  # fmt: skip
