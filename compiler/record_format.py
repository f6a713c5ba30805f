"""Records of frames that failed in TorchDynamo: the file format.

A record holds one Python frame as Dynamo saw it when it started converting it: the
code object, the closure, the globals and builtins the code names, the arguments
(tensors with their values, modules with their state), the ``torch.compile`` options,
the Dynamo and inductor config that differ from torch's defaults, and the failure's
signature.  ``tcompile replay`` rebuilds a function from it and compiles only that.

File format (version 2; version 1 is read too, as unsigned)::

    TCOMPILE-RECORD 2\\n        magic and format version
    {...}\\n                     metadata: one line of JSON, read without unpickling
    <payload>                    pickle of {part name: dill pickle of the part}

The metadata holds the payload's size and SHA-256, so a truncated or altered file is
refused before a byte of it is unpickled, and an HMAC-SHA256 of the rest of the
metadata (``"hmac"``) under a key kept in the user's cache directory (trust.py).
Replaying executes the recorded code, like unpickling: a record whose HMAC does not
verify with this user's key (someone else's, or crafted) is replayed only with
``--trust``.  The outer container is read with an unpickler that loads no class.  Each part is pickled on its own: a local
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
import pickle
import pickletools
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import layout, trust

if TYPE_CHECKING:
    from collections.abc import Mapping

MAGIC = b"TCOMPILE-RECORD"
FORMAT = 2
MAX_HEADER = 1 << 20  # the metadata line is small; a longer "line" is not a record


class RecordError(Exception):
    """A file that cannot be used as a record (said in one line; exit 2)."""


@dataclasses.dataclass
class RecordInfo:
    path: str
    kind: str  # "tcompile" | "torch"
    meta: dict[str, Any]
    payload_offset: int = 0

    @property
    def trusted(self) -> bool:
        """Signed by this user's tcompile (so it may be replayed without --trust)."""
        return is_trusted(self)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, **self.meta, "trusted": self.trusted}


# ---------------------------------------------------------------- reading and writing


def is_record(path: str) -> bool:
    """A frame's record: tcompile's (by its magic line) or torch's own ``.rec``."""
    if path.endswith(".rec") and os.path.isfile(path):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def write_record(
    path: str | os.PathLike[str], meta: dict[str, Any], payload: bytes, *, sign: bool = True
) -> None:
    """Atomically: a reader never sees half a record.  Signed with this user's key."""
    meta = dict(meta, format=FORMAT, payload_bytes=len(payload))
    meta.pop("hmac", None)
    meta["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    meta = json.loads(json.dumps(meta, default=str))  # what a reader will see
    if sign:
        meta["hmac"] = trust.sign(_canonical(meta))
    header = json.dumps(meta, sort_keys=True).encode()
    layout.write_file(path, MAGIC + b" %d\n" % FORMAT + header + b"\n" + payload)


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
    _check_types(p, meta)
    have, want = size - offset, meta["payload_bytes"]
    if have < want:
        raise RecordError(f"{p}: truncated record: the payload has {have} of {want} bytes")
    if have > want:
        raise RecordError(f"{p}: corrupt record: {have - want} bytes after the payload")
    return RecordInfo(str(p), "tcompile", meta, offset)


# metadata fields and the types they must have (others are shown as text, never used)
_TYPES: dict[str, tuple[type, ...]] = {
    "payload_bytes": (int,),
    "payload_sha256": (str,),
    "hmac": (str,),
    "format": (int,),
    "signature": (dict,),
    "signature_text": (str,),
    "function": (str,),
    "file": (str,),
    "line": (int,),
    "python": (str,),
    "torch": (str,),
    "compile": (dict,),
    "arguments": (dict,),
    "unrecorded": (dict,),
    "sizes": (dict,),
    "user_stack": (list,),
    "argv": (list,),
    "seconds_into_program": (int, float),
}


def _check_types(p: Path, meta: dict[str, Any]) -> None:
    """Metadata with the wrong types is a corrupt record (exit 2), never a crash."""
    for key, types in _TYPES.items():
        if key not in meta or (meta[key] is None and key != "payload_bytes"):
            continue
        value = meta[key]
        if isinstance(value, bool) or not isinstance(value, types):
            raise RecordError(
                f"{p}: corrupt record (metadata {key!r} is a {type(value).__name__}, "
                f"not {' or '.join(t.__name__ for t in types)})"
            )
    if meta["payload_bytes"] < 0:
        raise RecordError(f"{p}: corrupt record (a negative payload size)")
    for key in ("sizes", "compile", "arguments", "unrecorded", "signature"):
        value = meta.get(key) or {}
        if not all(isinstance(k, str) for k in value):
            raise RecordError(f"{p}: corrupt record (metadata {key!r} has non-text keys)")
    if "sizes" in meta and meta["sizes"] is not None:
        bad = [k for k, v in meta["sizes"].items() if isinstance(v, bool) or not isinstance(v, int)]
        if bad:
            raise RecordError(f"{p}: corrupt record (metadata 'sizes' has non-integer {bad[0]!r})")


def _canonical(meta: Mapping[str, object]) -> bytes:
    """What the HMAC covers: the metadata (which holds the payload's SHA-256) without
    the HMAC itself, as canonical JSON."""
    body = {k: v for k, v in meta.items() if k != "hmac"}
    return b"tcompile-record\n" + json.dumps(body, sort_keys=True).encode()


def is_trusted(info: RecordInfo) -> bool:
    """Signed by this user's key (so written by tcompile for this user)."""
    mac = info.meta.get("hmac")
    return (
        info.kind == "tcompile"
        and isinstance(mac, str)
        and trust.verify(_canonical(info.meta), mac)
    )


def check_payload(info: RecordInfo) -> bytes:
    """The payload, checked against the SHA-256 in the metadata (nothing unpickled)."""
    if info.kind != "tcompile":
        return b""
    with open(info.path, "rb") as f:
        f.seek(info.payload_offset)
        payload = f.read()
    if hashlib.sha256(payload).hexdigest() != info.meta.get("payload_sha256"):
        raise RecordError(f"{info.path}: corrupt record (the payload's checksum does not match)")
    return payload


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


def read_payload(info: RecordInfo, *, expect_sha256: str | None = None) -> dict[str, bytes]:
    """The pickled parts of a tcompile record, checked against the metadata first (and
    against ``expect_sha256``, what the parent checked).  The outer dict of bytes is
    read by an unpickler that loads no class and calls nothing."""
    payload = check_payload(info)
    if expect_sha256 is not None and info.meta.get("payload_sha256") != expect_sha256:
        raise RecordError(f"{info.path}: the record changed since it was checked")
    try:
        parts = _PlainUnpickler(io.BytesIO(payload)).load()
    except Exception as exc:
        raise RecordError(
            f"{info.path}: corrupt record (the payload is not a plain dict of parts: "
            f"{type(exc).__name__})"
        ) from None
    if not isinstance(parts, dict) or not all(
        isinstance(k, str) and isinstance(v, bytes) for k, v in parts.items()
    ):
        raise RecordError(f"{info.path}: corrupt record (unexpected payload layout)")
    return parts


class _PlainUnpickler(pickle.Unpickler):
    """Loads only dicts, strings and bytes: any class or function is refused."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise pickle.UnpicklingError(f"refused to load {module}.{name}")
