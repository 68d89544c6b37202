"""A replica's configuration on disk: reconfiguration txns in the log (their records flagged, their
configuration with them) and the configuration file, both read back after reopening; damage to
either is corruption, named."""

from __future__ import annotations

import os

import pytest

from storage import DiskStore, configfile
from zabray.errors import CorruptionError
from zabray.protocol.membership import Membership
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid

NEW = Membership.of([1, 2, 4], [5], addresses={1: "a:1:2;a:3", 2: "b:1:2;b:3", 4: "d:1:2;d:3", 5: "e:1:2;e:3"})


def test_reconfiguration_txns_and_the_config_file_survive_a_reopen(tmp_path: os.PathLike[str]) -> None:
    z = Zxid.of(1, 2)
    txns = [Txn(Zxid.of(1, 1), b"v1", 1, 7), Txn(z, b"change", 2, 8, NEW.with_version(z)), Txn(Zxid.of(1, 3), b"v3")]
    with DiskStore(tmp_path, segment_bytes=1 << 16) as store:
        store.append(txns)
        store.sync()
        store.write_config(NEW.with_version(z), left=True)
    with DiskStore(tmp_path, segment_bytes=1 << 16) as store:
        st = store.recover()
    assert list(st.txns) == txns and st.txns[1].config is not None and st.txns[1].config.voters == {1, 2, 4}
    assert st.config == NEW.with_version(z) and st.left
    assert st.txns[0].config is None and st.txns[1].value == b"change"


def test_a_store_that_never_wrote_a_configuration_has_none(tmp_path: os.PathLike[str]) -> None:
    with DiskStore(tmp_path, segment_bytes=1 << 16) as store:
        st = store.recover()
    assert st.config is None and not st.left


def test_a_damaged_config_file_is_corruption(tmp_path: os.PathLike[str]) -> None:
    configfile.write(str(tmp_path), NEW.with_version(9), False)
    path = os.path.join(tmp_path, configfile.NAME)
    data = bytearray(open(path, "rb").read())
    data[20] ^= 0xFF
    open(path, "wb").write(bytes(data))
    with pytest.raises(CorruptionError, match="config: checksum mismatch"):
        configfile.read(str(tmp_path))
