"""Ensemble configuration: YAML files in ``configs/``, validated at start.

Every value is checked when the ensemble starts, and an error names the key and says what to
fix, so a typo never surfaces as a hang minutes later. Times are in ticks except ``tick_ms``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zabray import yamlfile
from zabray.errors import ConfigError
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.wire.four_letter import parse_words
from zabray.wire.framing import DEFAULT_MAX_FRAME

SNAP_CHUNK_MAX = DEFAULT_MAX_FRAME // 2
"""A SNAP part plus its message header must fit one peer frame with room to spare."""
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "local.yaml"


@dataclass(frozen=True)
class EnsembleConfig:
    tick_ms: int = 20
    """Length of one tick; every protocol timeout below is a number of ticks."""
    init_limit: int = 250
    sync_limit: int = 50
    ping_interval: int = 2
    finalize_wait: int = 2
    election_resend: int = 5
    election_resend_max: int = 50
    max_outstanding: int = 1000
    diff_window: int = 100_000
    diff_chunk: int = 1000
    snap_chunk: int = 16 << 20
    """Bytes per SNAP message: a larger state goes to a learner in parts, each under half the
    64 MiB peer frame limit (at most 32 MiB)."""
    fsync: bool = True
    """False skips fdatasync: faster, and acknowledged writes may be lost on a power cut."""
    snapshot_every: int = 100_000
    """Txns between a replica's snapshots (spread between half and all of it)."""
    keep_snapshots: int = 3
    host: str = "127.0.0.1"
    quorum_port: int = 0
    client_port: int = 0
    """Base ports; 0 picks free ones when a replica first starts, which it listens on again
    when restarted (a new one only if another process took it). With a base port, replica sid
    uses base + sid."""
    zk_client_port: int = 0
    """With ``service: zookeeper``: the base port of ZooKeeper's client protocol (kazoo, zkCli.sh,
    the Java client); replica sid listens on base + sid, 0 picks free ports (kept as
    ``client_port``'s are)."""
    zk_secure_client_port: int = -1
    """ZooKeeper's secureClientPort: a second ZooKeeper client port speaking TLS (base port as
    ``zk_client_port``: replica sid listens on base + sid, 0 picks free ports), with the
    certificate ``zk_tls_cert``/``zk_tls_key`` (default ``tls_cert``/``tls_key``). -1: none."""
    zk_tls_ca: str = ""
    zk_tls_cert: str = ""
    zk_tls_key: str = ""
    """The secure port's CA (clients' certificates must chain to it) and its own certificate and
    key; empty: ``tls_ca``/``tls_cert``/``tls_key``."""
    zk_tls_client_auth: str = "need"
    """ZooKeeper's ssl.clientAuth on the secure port: need (a client certificate from
    ``zk_tls_ca`` is required), want (checked if given) or none."""
    zk_min_session_timeout_ms: int = 1000
    zk_max_session_timeout_ms: int = 60000
    """The range a client's requested session timeout is clamped to (ZooKeeper's
    minSessionTimeout/maxSessionTimeout; its defaults, 2 and 20 ticks of 2 s, are 4 s and 40 s)."""
    zk_max_frame: int = 0xFFFFF
    """The largest request frame accepted (ZooKeeper's jute.maxbuffer, 1 MiB - 1)."""
    zk_max_outstanding: int = 1000
    """Requests one ZooKeeper client connection may have unanswered; beyond them, or while its
    unread replies pass 4 MiB, the replica stops reading that connection until answers go out
    (ZooKeeper's globalOutstandingLimit, which bounds the server's requests as a whole). A client
    that pipelines without reading its replies then costs the replica that much memory, no more."""
    zk_four_letter_words: str = "ruok,srvr,stat,mntr,conf,isro"
    """The four-letter words answered on the ZooKeeper port, comma-separated ("*": all of them)."""
    zk_container_check_ms: int = 60000
    """How often the leader deletes empty containers and expired TTL znodes (0: never)."""
    zk_super_digest: str = ""
    """``super:<base64 sha1>`` of ZooKeeper's superuser credential (empty: no superuser)."""
    zk_sasl_jaas_file: str = ""
    """A JAAS file in ZooKeeper's own format whose ``zk_sasl_jaas_section`` names
    ``org.apache.zookeeper.server.auth.DigestLoginModule`` with ``user_<name>="<password>"``
    options: clients authenticate with SASL DIGEST-MD5 as those users, and ACLs may name the
    ``sasl`` scheme. Read by each replica on its node at start; the users and passwords never
    appear in traces, status, logs or ``conf``. Empty: no SASL."""
    zk_sasl_jaas_section: str = "Server"
    """The JAAS section with the users (ZooKeeper's ``zookeeper.sasl.serverconfig``)."""
    zk_read_only: bool = False
    """A replica cut off from its quorum serves read-only sessions (kazoo's ``read_only=True``,
    the Java client's ``canBeReadOnly``), as ZooKeeper does with ``readonlymode.enabled=true``."""
    data_dir: str = "/tmp/zabray/data"
    run_dir: str = "runs"
    trace: bool = True
    trace_messages: bool = False
    """With ``trace``: a ``message`` row per channel message a replica sends, holds, releases or
    receives (not PING/TOUCH), so a replayed scenario can prove an interleaving from its trace."""
    service: str = "broadcast"
    """"broadcast": opaque values (a ValueLog); "zookeeper": the data tree, sessions and watches."""
    snapshot_actor: bool = False
    """True: a snapshot actor asks replicas for snapshots instead of each replica self-triggering."""
    auth: bool = True
    """Replicas and broadcast clients prove they hold the ensemble secret on every connection.
    False only to measure what that costs on a machine nobody else can reach."""
    secret_file: str = ""
    """A file holding the ensemble secret (``zabray secret FILE``); empty: a new one per start."""
    tls: bool = False
    """TLS on the peer ports (mutual: each replica verifies the other's certificate) and the client port."""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    """The CA every certificate must chain to, and this host's certificate and key (``zabray certs``)."""
    tls_client_certs: bool = False
    """With ``tls``: the client port also requires a certificate signed by ``tls_ca`` from clients."""
    tls_client_cert: str = ""
    tls_client_key: str = ""
    """The certificate and key clients present (default: ``tls_cert``/``tls_key``)."""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, source: str | os.PathLike[str] | dict[str, Any] | EnsembleConfig | None = None,
             **overrides: Any) -> EnsembleConfig:
        """From a YAML path, a dict, an ``EnsembleConfig`` or None (``configs/local.yaml``)."""
        if isinstance(source, EnsembleConfig):
            data = dataclasses.asdict(source)
        elif isinstance(source, dict):
            data = dict(source)
        else:
            path = Path(source) if source is not None else DEFAULT_CONFIG
            loaded = yamlfile.load(path, "config file") or {}
            if not isinstance(loaded, dict):
                raise ConfigError(f"config file {path} must hold a mapping of keys to values")
            data = loaded
        data.update(overrides)
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnsembleConfig:
        """Validate every key; a ``ConfigError`` names *all* the bad ones at once, so a config
        is fixed in one pass rather than one error per try."""
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}
        problems: list[str] = []
        unknown = sorted(set(data) - set(known) - {"extra"})
        if unknown:
            problems.append(f"unknown config key{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(repr(k) for k in unknown)} (known keys: {', '.join(sorted(known))})")
        values: dict[str, Any] = {}
        for name, f in known.items():
            if name not in data:
                continue
            v = data[name]
            want = f.type if isinstance(f.type, type) else {"int": int, "bool": bool, "str": str}.get(str(f.type))
            if want is int and (isinstance(v, bool) or not isinstance(v, int)):
                problems.append(f"config key {name!r} must be an integer, got {v!r}")
            elif want is bool and not isinstance(v, bool):
                problems.append(f"config key {name!r} must be true or false, got {v!r}")
            elif want is str and not isinstance(v, str):
                problems.append(f"config key {name!r} must be a string, got {v!r}")
            else:
                values[name] = v
        cfg = cls(**values, extra=dict(data.get("extra") or {}))
        problems += cfg.problems()
        if problems:
            raise ConfigError("; ".join(problems))
        return cfg

    def validate(self) -> None:
        problems = self.problems()
        if problems:
            raise ConfigError("; ".join(problems))

    def problems(self) -> list[str]:
        """Every value out of range, each naming its key."""
        out: list[str] = []
        positive = ["tick_ms", "init_limit", "sync_limit", "ping_interval", "finalize_wait", "election_resend",
                    "election_resend_max", "max_outstanding", "zk_max_outstanding", "diff_chunk", "snapshot_every",
                    "keep_snapshots"]
        for name in positive:
            if getattr(self, name) < 1:
                out.append(f"config key {name!r} must be at least 1, got {getattr(self, name)}")
        for name in ("quorum_port", "client_port", "zk_client_port"):
            v = getattr(self, name)
            if not 0 <= v <= 65000:
                out.append(f"config key {name!r} must be 0 (pick free ports) or a base port below 65000")
        if not -1 <= self.zk_secure_client_port <= 65000:
            out.append("config key 'zk_secure_client_port' must be -1 (none), 0 (pick free ports) or a base port "
                       "below 65000")
        if self.zk_secure_client_port >= 0:
            if self.service != "zookeeper":
                out.append("config key 'zk_secure_client_port' needs service: zookeeper")
            missing = [k for k in ("cert", "key") if not (getattr(self, f"zk_tls_{k}") or getattr(self, f"tls_{k}"))]
            if missing:
                out.append(f"config key 'zk_secure_client_port' needs a certificate: set "
                           f"{' and '.join(f'zk_tls_{k}' for k in missing)} (or tls_{missing[0]})")
            if self.zk_tls_client_auth != "none" and not (self.zk_tls_ca or self.tls_ca):
                out.append("config key 'zk_tls_client_auth' checks client certificates: set zk_tls_ca (or tls_ca), "
                           "or zk_tls_client_auth: none")
        if self.zk_tls_client_auth not in ("need", "want", "none"):
            out.append(f"config key 'zk_tls_client_auth' must be need, want or none, got {self.zk_tls_client_auth!r}")
        if self.diff_window < 0:
            out.append("config key 'diff_window' must be >= 0")
        if not 1024 <= self.snap_chunk <= SNAP_CHUNK_MAX:
            out.append(f"config key 'snap_chunk' must be between 1024 and {SNAP_CHUNK_MAX} bytes "
                       f"(half the peer frame limit), got {self.snap_chunk}")
        if self.sync_limit <= self.ping_interval and self.sync_limit >= 1:
            out.append("config key 'sync_limit' must exceed 'ping_interval', or every learner looks dead")
        if self.service not in ("broadcast", "zookeeper"):
            out.append(f"config key 'service' must be 'broadcast' or 'zookeeper', got {self.service!r}")
        if not 1 <= self.zk_min_session_timeout_ms <= self.zk_max_session_timeout_ms:
            out.append("config keys 'zk_min_session_timeout_ms' and 'zk_max_session_timeout_ms' must satisfy "
                       f"1 <= min <= max, got {self.zk_min_session_timeout_ms} and {self.zk_max_session_timeout_ms}")
        if not 1024 <= self.zk_max_frame <= 1 << 30:
            out.append(f"config key 'zk_max_frame' must be between 1024 and 2^30 bytes, got {self.zk_max_frame}")
        if self.zk_container_check_ms < 0:
            out.append("config key 'zk_container_check_ms' must be >= 0 (0: never)")
        try:
            parse_words(self.zk_four_letter_words)
        except ValueError as e:
            out.append(f"config key 'zk_four_letter_words': {e}")
        if self.zk_super_digest and not self.zk_super_digest.startswith("super:"):
            out.append("config key 'zk_super_digest' must look like super:<base64 sha1> (ZooKeeper's DigestAuthenticationProvider)")
        if self.zk_sasl_jaas_file and self.service != "zookeeper":
            out.append("config key 'zk_sasl_jaas_file' needs service: zookeeper (SASL is ZooKeeper's client protocol)")
        if self.zk_read_only and self.service != "zookeeper":
            out.append("config key 'zk_read_only' needs service: zookeeper")
        if not self.data_dir:
            out.append("config key 'data_dir' must name a directory")
        if self.secret_file and not self.auth:
            out.append("config key 'secret_file' is set but 'auth' is false; drop one of them")
        if self.tls:
            missing = [k for k in ("tls_ca", "tls_cert", "tls_key") if not getattr(self, k)]
            if missing:
                out.append(f"config key 'tls' needs {', '.join(missing)}: files made by `zabray certs DIR`")
        if bool(self.tls_client_cert) != bool(self.tls_client_key):
            out.append("config keys 'tls_client_cert' and 'tls_client_key' go together; set both or neither")
        return out

    def sasl_users(self) -> dict[str, str] | None:
        """The DIGEST-MD5 users of ``zk_sasl_jaas_file`` (None without one). A ``ConfigError``
        names the file and line of a mistake, never a password."""
        if not self.zk_sasl_jaas_file:
            return None
        from zabray.zk.jaas import JaasError, digest_users

        path = Path(self.zk_sasl_jaas_file)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise ConfigError(f"config key 'zk_sasl_jaas_file': cannot read {path}: {why}") from None
        try:
            return digest_users(text, str(path), self.zk_sasl_jaas_section)
        except JaasError as e:
            raise ConfigError(f"config key 'zk_sasl_jaas_file': {e}") from None

    def protocol(self, voters: frozenset[int], observers: frozenset[int]) -> ProtocolConfig:
        return ProtocolConfig(
            voters=voters, observers=observers, init_limit=self.init_limit, sync_limit=self.sync_limit,
            ping_interval=self.ping_interval, finalize_wait=self.finalize_wait,
            election_resend=self.election_resend, election_resend_max=self.election_resend_max,
            max_outstanding=self.max_outstanding, diff_window=self.diff_window, diff_chunk=self.diff_chunk,
            snap_chunk=self.snap_chunk,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
