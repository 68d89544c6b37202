"""Config keys whose range protects the protocol: a bad value fails at load, naming the key."""

from __future__ import annotations

import pytest

from zabray.config import SNAP_CHUNK_MAX, EnsembleConfig
from zabray.errors import ConfigError
from zabray.wire.framing import DEFAULT_MAX_FRAME


def test_snap_chunk_reaches_the_protocol() -> None:
    cfg = EnsembleConfig.load(snap_chunk=64 << 10)
    assert cfg.protocol(frozenset({1, 2, 3}), frozenset()).snap_chunk == 64 << 10


@pytest.mark.parametrize("bad", [0, 1023, SNAP_CHUNK_MAX + 1, DEFAULT_MAX_FRAME])
def test_a_snap_chunk_that_could_not_fit_a_frame_or_is_tiny_is_refused(bad: int) -> None:
    with pytest.raises(ConfigError, match="'snap_chunk' must be between 1024 and"):
        EnsembleConfig.load(snap_chunk=bad)


def test_the_shipped_configs_load_with_the_default_snap_chunk() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "configs"
    for name in ("local.yaml", "cluster.yaml"):
        assert EnsembleConfig.load(root / name).snap_chunk == 16 << 20
