"""A lab of hosts on one machine: network namespaces on a bridge, each a host with its own IP,
disk and Ray node, and a nemesis that cuts, partitions, slows and crashes them.

``Lab.up(hosts=3)`` builds one (root or CAP_NET_ADMIN and CAP_SYS_ADMIN), ``Lab.find()`` finds
the one that is up, ``Lab.down()`` removes it; ``zabray lab ...`` is the same from the shell.
Pure planning is in ``plan`` and ``state``; ``net``, ``nodes`` and ``supervisor`` do the IO.
"""

from zabray.lab.errors import LabCommandError, LabNotUpError, LabPermissionError, LabUnsupportedError
from zabray.lab.lab import Lab
from zabray.lab.plan import LabSpec, RaySettings

__all__ = ["Lab", "LabSpec", "RaySettings", "LabCommandError", "LabNotUpError", "LabPermissionError",
           "LabUnsupportedError"]
