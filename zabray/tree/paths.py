"""Znode path rules (as ZooKeeper): absolute, "/"-separated, no trailing slash except the root,
no empty, "." or ".." components, no NUL, control, private-use or non-BMP characters."""

from __future__ import annotations

import re

from zabray.tree.errors import BadArgumentsError

ROOT = "/"
#: ZooKeeper's own znodes, present in every tree; none of them can be deleted (BAD_ARGUMENTS).
ZOOKEEPER, QUOTA, CONFIG = "/zookeeper", "/zookeeper/quota", "/zookeeper/config"
SPECIAL_PATHS = frozenset({ROOT, ZOOKEEPER, QUOTA, CONFIG})


def _bad_char(c: str) -> bool:
    """ZooKeeper's rule, which it applies to a path's UTF-16 code units: controls, U+D800..U+F8FF
    (surrogates and the private use area) and U+FFF0..U+FFFF. A character beyond U+FFFF is two
    surrogates in Java, so every one of them is refused too."""
    o = ord(c)
    return o < 0x20 or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xF8FF or o >= 0xFFF0


# The characters _bad_char rejects, as one class: every write validates its path, and a
# per-character Python loop was a visible share of a loaded leader's time.
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


# Paths already found valid: a write's path is checked where the request is decoded, where it is
# prepared, and where each replica decodes its txn, and most writes reuse a few paths. A cache of
# a pure function's answers (bounded in entries and in each entry's length) changes no result.
_VALID: set[str] = set()
_VALID_MAX, _VALID_MAX_LEN = 4096, 256


def validate_path(path: object, *, sequential: bool = False) -> str:
    """Return ``path`` if valid, else raise ``BadArgumentsError``.

    A sequential create's path may end in "/" (the counter becomes the whole last component),
    so it is checked as if the 10-digit suffix were already there.
    """
    if type(path) is not str:
        raise BadArgumentsError(f"path must be a string, got {type(path).__name__}")
    if not sequential and path in _VALID:
        return path
    check = path + "0" if sequential else path
    if not check.startswith("/"):
        raise BadArgumentsError(f"path must be absolute: {path!r}", path=path)
    if check == ROOT:
        return path
    if check.endswith("/"):
        raise BadArgumentsError(f"path must not end with '/': {path!r}", path=path)
    for part in check[1:].split("/"):
        if part == "":
            raise BadArgumentsError(f"empty path component in {path!r}", path=path)
        if part in (".", ".."):
            raise BadArgumentsError(f"relative path component {part!r} in {path!r}", path=path)
    if _BAD_CHARS.search(check) is not None:
        raise BadArgumentsError(f"invalid character in path {path!r}", path=path)
    if not sequential and len(path) <= _VALID_MAX_LEN:
        if len(_VALID) >= _VALID_MAX:
            _VALID.clear()
        _VALID.add(path)
    return path


def parent_of(path: str) -> str:
    """The parent of a valid non-root path."""
    i = path.rfind("/")
    return ROOT if i == 0 else path[:i]


def name_of(path: str) -> str:
    """The last component of a valid non-root path."""
    return path[path.rfind("/") + 1 :]
