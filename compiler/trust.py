"""The key that signs records (HMAC-SHA256), kept in the user's cache directory.

A record tcompile writes for this user is signed with this key; ``tcompile replay``
runs only records whose signature verifies, unless the user says ``--trust``.  The
key is made on first use: 32 random bytes, in ``$TCOMPILE_CACHE_DIR`` or
``$XDG_CACHE_HOME/tcompile`` or ``~/.cache/tcompile``, file mode 0600.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_FILE = "record-key"


def cache_dir() -> Path:
    env = os.environ.get("TCOMPILE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tcompile"


def key(create: bool = True) -> bytes | None:
    """This user's key (made on first use when ``create``)."""
    path = cache_dir() / KEY_FILE
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        if not create:
            return None
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return bytes.fromhex(path.read_text().strip())


def sign(data: bytes) -> str:
    k = key()
    assert k is not None
    return hmac.new(k, data, hashlib.sha256).hexdigest()


def verify(data: bytes, mac: str) -> bool:
    k = key(create=False)
    if k is None:
        return False
    return hmac.compare_digest(hmac.new(k, data, hashlib.sha256).hexdigest(), mac)
