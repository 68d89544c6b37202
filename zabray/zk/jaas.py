"""The SASL users of a ZooKeeper server, from a JAAS configuration file as ZooKeeper reads it.

ZooKeeper's server takes its SASL setup from the ``Server`` section of the JAAS file named by
``java.security.auth.login.config``; for DIGEST-MD5 that section names
``org.apache.zookeeper.server.auth.DigestLoginModule`` with one ``user_<name>="<password>"``
option per user. zabray reads the same file (config ``zk_sasl_jaas_file``), so an operator's
existing file works unchanged. The syntax is Java's ConfigFile's: sections ``Name { Module Flag
key=value ...; ... };`` with ``//`` and ``/* */`` comments and double-quoted values.

Pure: text in, users out. A mistake is a ``JaasError`` naming the file and line; its message
never quotes a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DIGEST_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KERBEROS_MODULES = frozenset({"com.sun.security.auth.module.Krb5LoginModule",
                              "com.ibm.security.auth.module.Krb5LoginModule"})
FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})


class JaasError(ValueError):
    """A JAAS file zabray cannot use: ``file:line: what is wrong``."""


@dataclass(frozen=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)
    line: int = 0


_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"((?:[^"\\]|\\.)*)"|([{};=])|([^\s{};="/]+)', re.S)


def _tokens(text: str, source: str) -> list[tuple[str, str, int]]:
    """(kind, value, line): kind is "word", "string" or the punctuation itself."""
    out: list[tuple[str, str, int]] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            what = {'"': "a string that is never closed", "/": "a comment that is never closed"}
            raise JaasError(f"{source}:{line}: {what.get(text[pos], f'unexpected character {text[pos]!r}')}")
        if m[1] is not None:
            out.append(("string", re.sub(r"\\(.)", r"\1", m[1]), line))
        elif m[2] is not None:
            out.append((m[2], m[2], line))
        elif m[3] is not None:
            out.append(("word", m[3], line))
        line += m[0].count("\n")
        pos = m.end()
    return out


def parse(text: str, source: str = "<jaas>") -> dict[str, list[LoginModule]]:
    """Every section of a JAAS file: {section name: its login modules, in order}."""
    toks = _tokens(text, source)
    sections: dict[str, list[LoginModule]] = {}
    i = 0

    def take(*kinds: str) -> tuple[str, str, int]:
        nonlocal i
        if i >= len(toks):
            last = toks[-1][2] if toks else 1
            raise JaasError(f"{source}:{last}: the file ends inside a section (a missing '}};' or ';'?)")
        tok = toks[i]
        if tok[0] not in kinds:
            want = " or ".join(repr(k) if k in "{};=" else k for k in kinds)
            raise JaasError(f"{source}:{tok[2]}: expected {want}, found {tok[1]!r}")
        i += 1
        return tok

    while i < len(toks):
        _, name, line = take("word")
        if name in sections:
            raise JaasError(f"{source}:{line}: section {name!r} appears twice")
        take("{")
        modules: list[LoginModule] = []
        while i < len(toks) and toks[i][0] != "}":
            _, module, mline = take("word")
            _, flag, fline = take("word")
            if flag.lower() not in FLAGS:
                raise JaasError(f"{source}:{fline}: control flag {flag!r} of {module}: use one of "
                                f"{', '.join(sorted(FLAGS))}")
            options: dict[str, str] = {}
            while i < len(toks) and toks[i][0] != ";":
                _, key, kline = take("word")
                take("=")
                _, value, _ = take("string", "word")
                if key in options:
                    raise JaasError(f"{source}:{kline}: option {key!r} given twice")
                options[key] = value
            take(";")
            modules.append(LoginModule(module, flag.lower(), options, mline))
        take("}")
        take(";")
        sections[name] = modules
    return sections


def digest_users(text: str, source: str = "<jaas>", section: str = "Server") -> dict[str, str]:
    """The DIGEST-MD5 users of ``section``: {name: password} from its DigestLoginModule's
    ``user_<name>`` options. A section that asks for Kerberos is refused: GSSAPI is not served."""
    sections = parse(text, source)
    if section not in sections:
        have = ", ".join(sorted(sections)) or "none"
        raise JaasError(f"{source}: no {section!r} section (sections: {have})")
    users: dict[str, str] = {}
    found = False
    for m in sections[section]:
        if m.name in KERBEROS_MODULES:
            raise JaasError(f"{source}:{m.line}: {m.name} asks for Kerberos (GSSAPI), which zabray does not "
                            f"serve; use {DIGEST_MODULE} with user_<name>=\"<password>\" options")
        if m.name != DIGEST_MODULE:
            raise JaasError(f"{source}:{m.line}: login module {m.name} is not supported; use {DIGEST_MODULE}")
        found = True
        for key, value in m.options.items():
            if key.startswith("user_") and len(key) > len("user_"):
                users[key[len("user_"):]] = value
    if not found or not users:
        raise JaasError(f"{source}: section {section!r} defines no DIGEST-MD5 user (user_<name>=\"<password>\")")
    return users


__all__ = ["DIGEST_MODULE", "JaasError", "LoginModule", "digest_users", "parse"]
