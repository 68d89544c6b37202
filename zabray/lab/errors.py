"""The lab's errors: both are usage errors (exit 2), each naming what is missing."""

from __future__ import annotations

from zabray.errors import ConfigError, ZabError


class LabPermissionError(ConfigError):
    """The lab needs root or CAP_NET_ADMIN (and CAP_SYS_ADMIN for its namespaces and mounts)."""


class LabUnsupportedError(ConfigError):
    """The kernel or the machine lacks what a nemesis action needs (e.g. the netem qdisc)."""


class LabNotUpError(ConfigError):
    """No lab of that name is up on this machine."""


class LabCommandError(ZabError):
    """An ``ip`` or ``tc`` command the lab ran failed; the message quotes it and its error."""
