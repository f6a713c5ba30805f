"""Records of frames that failed in TorchDynamo: the file format.

A record holds one Python frame as Dynamo saw it when it started converting it: the
code object, the closure, the globals and builtins the code names, the arguments
(tensors with their values, modules with their state), the ``torch.compile`` options,
the Dynamo and inductor config that differ from torch's defaults, and the failure's
signature.  ``tcompile replay`` rebuilds a function from it and compiles only that.

File format (version 1)::

    TCOMPILE-RECORD 1\\n        magic and format version
    {...}\\n                     metadata: one line of JSON, read without unpickling
    <payload>                    dill pickle of {part name: dill pickle of the part}

The metadata holds the payload's size and SHA-256, so a truncated or altered file is
refused before a byte of it is unpickled.  Each part is pickled on its own: a local
that cannot be pickled (a generator, an open file) is listed under ``unrecorded`` and
the rest of the record is still written.  Code objects do not carry across Python
minor versions; the metadata says which one wrote the record.

Where the frame comes from: Dynamo converts a frame in
``torch._dynamo.convert_frame._compile(code, globals, locals, builtins, closure, ...)``.
A wrapper around it attaches a snapshot of those (references, a shallow copy of the
locals) to any exception leaving it.  The first wrapper an exception leaves is the
innermost frame being converted; Dynamo runs nothing of the frame before converting
it, so its locals are the frame's arguments as the program passed them.  The record is
written when tcompile reports the failure (the program dies of it), or at once for
every failing frame under ``tcompile run --record``: child/frames.py.

pickletools is used to look at a pickle (torch's own records) without executing it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import pickletools
from pathlib import Path
from typing import Any

MAGIC = b"TCOMPILE-RECORD"
FORMAT = 1
MAX_HEADER = 1 << 20  # the metadata line is small; a longer "line" is not a record


class RecordError(Exception):
    """A file that cannot be used as a record (said in one line; exit 2)."""


@dataclasses.dataclass
class RecordInfo:
    path: str
    kind: str  # "tcompile" | "torch"
    meta: dict[str, Any]
    payload_offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, **self.meta}


# ---------------------------------------------------------------- reading and writing


def write_record(path: str | os.PathLike[str], meta: dict[str, Any], payload: bytes) -> None:
    """Atomically: a reader never sees half a record."""
    meta = dict(meta, format=FORMAT, payload_bytes=len(payload))
    meta["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    header = json.dumps(meta, default=str, sort_keys=True).encode()
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "wb") as f:
        f.write(MAGIC + b" %d\n" % FORMAT)
        f.write(header + b"\n")
        f.write(payload)
    os.replace(tmp, path)


def read_info(path: str | os.PathLike[str]) -> RecordInfo:
    """The record's metadata; executes and unpickles nothing.  Raises RecordError."""
    p = Path(path)
    if not p.exists():
        raise RecordError(f"record not found: {path}")
    if p.is_dir():
        raise RecordError(f"{path} is a directory, not a record")
    try:
        size = p.stat().st_size
        with open(p, "rb") as f:
            head = f.read(len(MAGIC) + 32)
    except OSError as exc:
        raise RecordError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size == 0:
        raise RecordError(f"{path} is empty: not a record")
    if head.startswith(MAGIC):
        return _read_tcompile_header(p, size)
    if head[:1] == b"\x80":  # a pickle: maybe torch's own record
        return _read_torch_record(p, size)
    raise RecordError(f"{path} is not a tcompile record (nor one of torch's replay records)")


def _read_tcompile_header(p: Path, size: int) -> RecordInfo:
    with open(p, "rb") as f:
        first = f.readline(64)
        second = f.readline(MAX_HEADER)
        offset = f.tell()
    parts = first.strip().split(b" ")
    if len(parts) != 2 or not parts[1].isdigit():
        raise RecordError(f"{p}: corrupt record (bad first line)")
    version = int(parts[1])
    if version > FORMAT:
        raise RecordError(
            f"{p}: record format {version} is newer than this tcompile reads "
            f"({FORMAT}); upgrade tcompile"
        )
    if not second.endswith(b"\n"):
        raise RecordError(f"{p}: truncated record (the metadata line is cut short)")
    try:
        meta = json.loads(second)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RecordError(f"{p}: corrupt record (the metadata is not JSON)") from None
    if not isinstance(meta, dict) or "payload_bytes" not in meta:
        raise RecordError(f"{p}: corrupt record (the metadata has no payload size)")
    have, want = size - offset, int(meta["payload_bytes"])
    if have < want:
        raise RecordError(f"{p}: truncated record: the payload has {have} of {want} bytes")
    if have > want:
        raise RecordError(f"{p}: corrupt record: {have - want} bytes after the payload")
    return RecordInfo(str(p), "tcompile", meta, offset)


def _read_torch_record(p: Path, size: int) -> RecordInfo:
    """torch's ``replay_record_enabled`` records are dill pickles of ExecutionRecord.
    The opcodes are walked (nothing executed) to check the file is whole and to
    find the class and names it holds; the function, exception type and first line
    are in torch's file name: ``{co_name}_{ExcType}_{co_firstlineno}.rec``."""
    data = p.read_bytes()
    strings: list[str] = []
    try:
        for _op, arg, _pos in pickletools.genops(io.BytesIO(data)):
            if isinstance(arg, str) and len(strings) < 2000:
                strings.append(arg)
    except Exception as exc:  # genops raises ValueError on a cut-short pickle
        raise RecordError(
            f"{p}: not a usable record (a damaged or truncated pickle: {exc})"
        ) from None
    if "ExecutionRecord" not in strings:
        raise RecordError(f"{p} is a pickle but not a record (no ExecutionRecord in it)")
    meta: dict[str, Any] = {"format": None, "payload_bytes": size, "writer": "torch"}
    stem = p.name[: -len(".rec")] if p.name.endswith(".rec") else p.stem
    bits = stem.rsplit("_", 2)
    if len(bits) == 3 and bits[2].isdigit():
        meta.update(
            function=bits[0],
            line=int(bits[2]),
            exc_type=bits[1],
            signature_text=f"{bits[1]} (from the file name)",
        )
    return RecordInfo(str(p), "torch", meta)


def read_payload(info: RecordInfo) -> dict[str, bytes]:
    """The pickled parts of a tcompile record, checked against the metadata first.
    Unpickles only the outer dict of bytes (it holds no objects of the program)."""
    import pickle

    with open(info.path, "rb") as f:
        f.seek(info.payload_offset)
        payload = f.read()
    if hashlib.sha256(payload).hexdigest() != info.meta.get("payload_sha256"):
        raise RecordError(f"{info.path}: corrupt record (the payload's checksum does not match)")
    parts = pickle.loads(payload)
    if not isinstance(parts, dict) or not all(isinstance(v, bytes) for v in parts.values()):
        raise RecordError(f"{info.path}: corrupt record (unexpected payload layout)")
    return parts
