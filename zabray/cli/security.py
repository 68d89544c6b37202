"""``zabray secret FILE`` and ``zabray certs DIR``: the files a multi-host ensemble needs.

Neither prints a key: ``secret`` writes the file (mode 0600) and prints its path only.
"""

from __future__ import annotations

import argparse

from zabray.cli import common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("secret", help="write a new ensemble secret to FILE (mode 0600)",
                       description="Write a new random ensemble secret (hex) to FILE, readable by its owner "
                                   "only; name it as secret_file in the config on every host.")
    p.add_argument("file")
    p.add_argument("--force", action="store_true", help="replace an existing file (rotation: see docs/security.md)")
    p.set_defaults(func=lambda a: common.guard(secret, a))
    p = sub.add_parser("certs", help="make a CA and certificates for TLS on the peer and client ports",
                       description="Make DIR/ca.pem (reused if present) and DIR/NAME.pem, DIR/NAME.key per "
                                   "name, signed by it; copy ca.pem and a node's pair to each host.")
    p.add_argument("dir")
    p.add_argument("names", nargs="*", default=["node", "client"],
                   help="certificates to make (default: node client)")
    p.add_argument("--days", type=int, default=825)
    p.add_argument("--hosts", default="", help="comma-separated host names/IPs for subjectAltName (informational)")
    p.set_defaults(func=lambda a: common.guard(certs, a))


def secret(args: argparse.Namespace) -> int:
    from zabray.net.keyfiles import write_secret

    path = write_secret(args.file, force=args.force)
    print(f"wrote a new ensemble secret to {path} (mode 0600); set secret_file: {path.resolve()}")
    return 0


def certs(args: argparse.Namespace) -> int:
    from zabray.net.tls import make_certs

    hosts = [h for h in args.hosts.split(",") if h] or None
    made = make_certs(args.dir, list(args.names), days=args.days, hosts=hosts)
    for name, path in made.items():
        print(f"{name}: {path}" + ("" if name == "ca" else f" (key {path.with_suffix('.key')})"))
    return 0
