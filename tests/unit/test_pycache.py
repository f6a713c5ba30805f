"""compiler/pycache.py: tcompile's own interpreters cache bytecode in its folder only
where the environment forbids writing it beside sources that have none."""

from __future__ import annotations

from tcompile.compiler import pycache


def test_bytecode_goes_to_tcompiles_folder_only_where_none_can_be_read(tmp_path, monkeypatch):
    monkeypatch.setenv(pycache.ENV, str(tmp_path / "pyc"))
    env = {"PYTHONDONTWRITEBYTECODE": "1", "HOME": "/h"}
    monkeypatch.setattr(pycache, "_torch_has_bytecode", lambda: False)
    out = pycache.helper_env(env)
    assert out == {"HOME": "/h", "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"  # the caller's dict is left as it was
    assert pycache.helper_env({"HOME": "/h"}) == {"HOME": "/h"}  # bytecode is written
    kept = {**env, "PYTHONPYCACHEPREFIX": "/theirs"}
    assert pycache.helper_env(kept) == kept  # the user's own prefix
    monkeypatch.setenv(pycache.ENV, "0")
    assert pycache.helper_env(env) == env  # turned off
    monkeypatch.setenv(pycache.ENV, str(tmp_path / "pyc"))
    monkeypatch.setattr(pycache, "_torch_has_bytecode", lambda: True)
    assert pycache.helper_env(env) == env  # pip compiled torch's: those are read
