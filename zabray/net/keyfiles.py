"""The ensemble secret on disk: made with ``zabray secret FILE``, named by ``secret_file``.

The file holds the key as hex on one line and must be readable by its owner only (like an ssh
key): a secret others can read is no secret. Nothing here logs or prints the key.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from zabray.errors import ConfigError
from zabray.wire.auth import MIN_SECRET_BYTES, Secret

SECRET_BYTES = 32


def new_secret() -> Secret:
    """A fresh random secret (an ensemble started without ``secret_file`` gets one of these)."""
    return Secret(secrets.token_bytes(SECRET_BYTES))


def write_secret(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Write a new secret to ``path`` (mode 0600); refuses to overwrite unless ``force``."""
    p = Path(path)
    if p.exists() and not force:
        raise ConfigError(f"{p} exists; pass --force to replace it (every replica must then restart with it)")
    tmp = p.with_name(p.name + ".tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(SECRET_BYTES) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except OSError as e:
        raise ConfigError(f"cannot write a secret to {p}: {e.strerror or e}") from None
    return p


def read_secret(path: str | os.PathLike[str]) -> Secret:
    """The secret in ``path``; ``ConfigError`` naming the file and what to fix otherwise."""
    p = Path(path)
    try:
        st = p.stat()
        text = p.read_text().strip()
    except OSError as e:
        raise ConfigError(f"config key 'secret_file': cannot read {p}: {e.strerror}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"config key 'secret_file': {p} is readable by others; run chmod 600 {p}")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise ConfigError(f"config key 'secret_file': {p} must hold the secret as hex on one line "
                          "(make one with `zabray secret FILE`)") from None
    if len(key) < MIN_SECRET_BYTES:
        raise ConfigError(f"config key 'secret_file': the secret in {p} is {len(key)} bytes; "
                          f"use at least {MIN_SECRET_BYTES} (`zabray secret FILE` makes {SECRET_BYTES})")
    return Secret(key)
