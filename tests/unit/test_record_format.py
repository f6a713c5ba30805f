"""The record format and `tcompile replay` on bad input: no compiles, no torch import.

Records are built here by hand with the real writer (record_format.write_record); the payload
of some is a pickle that would create a file if it were ever unpickled, which proves
that --info and every refusal below unpickle nothing.
"""

import json
import os
import pickle

import pytest

from helpers import run_tcompile
from tcompile.compiler import record_format as rec


class _Tripwire:
    """Unpickling this creates the file at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _meta(**kw):
    meta = {
        "tcompile": "0.1.0",
        "torch": "2.13.0+cpu",
        "python": "3.11.7",
        "function": "step",
        "file": "/x/train.py",
        "line": 12,
        "signature": {
            "stage": "eager",
            "kind": "capture",
            "exc_type": "exc.Unsupported",
            "message": "Data-dependent branching",
            "frame": "",
        },
        "signature_text": "eager/capture: exc.Unsupported: Data-dependent branching",
        "compile": {"backend": "inductor", "fullgraph": True},
        "arguments": {"x": "Tensor float32[8] on cpu"},
        "sizes": {"tensors": 1, "tensor_bytes": 32, "parts": 2},
    }
    meta.update(kw)
    return meta


@pytest.fixture
def tripwire_record(tmp_path):
    marker = tmp_path / "UNPICKLED"
    payload = pickle.dumps({"code": pickle.dumps(_Tripwire(str(marker)))})
    outer = pickle.dumps(_Tripwire(str(marker)))  # even the outer layer is a tripwire
    path = tmp_path / "record.pkl"
    rec.write_record(path, _meta(), outer + payload[:0])
    return path, marker


def test_roundtrip_header(tmp_path):
    path = tmp_path / "r.pkl"
    rec.write_record(path, _meta(), b"payload-bytes")
    info = rec.read_info(path)
    assert info.kind == "tcompile"
    assert info.meta["function"] == "step"
    assert info.meta["format"] == rec.FORMAT
    assert info.meta["payload_bytes"] == len(b"payload-bytes")


def test_info_unpickles_nothing_in_process(tripwire_record, monkeypatch):
    path, marker = tripwire_record

    def boom(*a, **k):
        raise AssertionError("something was unpickled")

    monkeypatch.setattr(pickle, "loads", boom)
    monkeypatch.setattr(pickle, "load", boom)
    monkeypatch.setattr(pickle, "Unpickler", boom)
    info = rec.read_info(path)
    assert info.meta["function"] == "step"
    assert not marker.exists()


def test_info_cli_executes_nothing(tripwire_record):
    path, marker = tripwire_record
    r = run_tcompile("replay", "--info", str(path))
    assert r.returncode == 0, r.stderr
    assert "step" in r.stdout and "Data-dependent branching" in r.stdout
    assert not marker.exists()
    r = run_tcompile("replay", "--info", "--json", str(path))
    data = json.loads(r.stdout)
    assert data["function"] == "step" and data["kind"] == "tcompile"
    assert not marker.exists()


def test_info_does_not_import_torch(tripwire_record):
    path, _ = tripwire_record
    r = run_tcompile(
        "replay",
        "--info",
        str(path),
        env={"PYTHONPATH": _torch_blocker(path.parent)},
    )
    assert r.returncode == 0, r.stderr


def _torch_blocker(where):
    d = where / "blocker"
    d.mkdir()
    (d / "torch.py").write_text("raise ImportError('torch must not be imported here')\n")
    return str(d)


def _bad(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _one_line_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("tcompile: error: ")
    for w in words:
        assert w in lines[0], lines[0]


def test_bad_records(tmp_path, tripwire_record):
    good, marker = tripwire_record
    whole = good.read_bytes()
    first, second, payload = whole.split(b"\n", 2)
    newer = first.replace(b" %d" % rec.FORMAT, b" 9") + b"\n" + second + b"\n" + payload
    cases = [
        (tmp_path / "missing.pkl", ("not found",)),
        (_bad(tmp_path, "empty.pkl", b""), ("empty",)),
        (_bad(tmp_path, "cut-header.pkl", whole[:40]), ("truncated",)),
        (_bad(tmp_path, "cut-payload.pkl", whole[:-10]), ("truncated", "payload")),
        (_bad(tmp_path, "random.bin", os.urandom(3000).replace(b"\x80", b"\x00")), ("not a",)),
        (_bad(tmp_path, "pickle.bin", pickle.dumps({"a": 1})), ("not a record",)),
        (_bad(tmp_path, "cut-pickle.rec", pickle.dumps({"ExecutionRecord": 1})[:-5]), ("damaged",)),
        (_bad(tmp_path, "newer.pkl", newer), ("format 9", "newer")),
        (tmp_path, ("directory",)),
    ]
    for path, words in cases:
        for extra in ([], ["--info"]):
            r = run_tcompile("replay", *extra, str(path))
            _one_line_error(r, *words)
    assert not marker.exists()


def test_python_version_mismatch_is_refused(tmp_path):
    path = tmp_path / "old-python.pkl"
    rec.write_record(path, _meta(python="3.9.1"), pickle.dumps({}))
    r = run_tcompile("replay", str(path))
    _one_line_error(r, "Python 3.9.1")


def test_altered_payload_is_refused_before_unpickling(tmp_path, tripwire_record):
    good, marker = tripwire_record
    data = bytearray(good.read_bytes())
    data[-3] ^= 0xFF  # same length, different bytes: the checksum catches it
    p = _bad(tmp_path, "altered.pkl", bytes(data))
    info = rec.read_info(p)
    with pytest.raises(rec.RecordError, match="checksum"):
        rec.read_payload(info)
    assert not marker.exists()


def test_torch_record_name_is_parsed(tmp_path):
    p = tmp_path / "forward_IndexError_31.rec"
    p.write_bytes(pickle.dumps({"cls": "ExecutionRecord", "x": [1, 2]}))
    info = rec.read_info(p)
    assert info.kind == "torch"
    assert (info.meta["function"], info.meta["line"], info.meta["exc_type"]) == (
        "forward",
        31,
        "IndexError",
    )


def test_altered_payload_is_refused_by_info_too(tmp_path, tripwire_record):
    """``replay --info`` checks the checksum as replay does: one line, exit 2."""
    good, marker = tripwire_record
    data = bytearray(good.read_bytes())
    data[-3] ^= 0xFF
    p = _bad(tmp_path, "altered.pkl", bytes(data))
    _one_line_error(run_tcompile("replay", "--info", str(p)), "checksum")
    assert not marker.exists()
