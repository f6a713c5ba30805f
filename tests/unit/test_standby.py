"""compiler/standby.py: a standby serves only where it is the same as a fresh worker,
and one nobody takes does not outlive close()."""

from __future__ import annotations

import time

from tcompile.compiler import standby
from tcompile.compiler.protocol import HookConfig, ServeSpec


def test_a_standby_serves_only_with_the_imports_a_fresh_worker_would_have():
    same = {"TORCHINDUCTOR_X": "1", "HOME": "/a"}
    assert standby._same_imports(same, {"TORCHINDUCTOR_X": "1", "HOME": "/b"})
    assert not standby._same_imports(same, {"HOME": "/a"})  # inductor read another config
    assert not standby._same_imports({**same, "TORCH_TRACE": "/t"}, same)


def test_only_a_launchers_worker_takes_one(tmp_path, monkeypatch):
    monkeypatch.delenv(standby.OFF_ENV, raising=False)
    config = HookConfig(
        dir=str(tmp_path / "ev"), serve=ServeSpec(graph=0, capture_dir=str(tmp_path))
    )
    assert standby.prewarm(tmp_path, 1) == 1
    try:
        # the user's program as a worker: a standby is not that
        assert standby.take(["python", "prog.py"], config, {}, 5.0) is None
        assert len(standby._WAITING) == 1
    finally:
        ((w, _),) = standby._WAITING
        standby.close()
    assert not standby._WAITING
    deadline = time.monotonic() + 10
    while w.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert w.proc.poll() is not None  # killed, not left behind


def test_off_by_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(standby.OFF_ENV, "1")
    assert standby.prewarm(tmp_path, 1) == 0
