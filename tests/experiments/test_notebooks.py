"""The notebooks in benchmarks/notebooks run top to bottom at their tiny size (ZABRAY_NB_SIZE=tiny)
against one shared local Ray cluster, draw their figure and leave results.parquet behind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]
NOTEBOOKS = Path(__file__).resolve().parents[2] / "benchmarks" / "notebooks"
FIGURE = {"01-zk-read-mix": "zk-read-mix.png", "02-broadcast-scaling": "clients-scaling.png",
          "03-failures": "failures.png", "04-observers": "observers.png"}


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """One Ray head for every notebook's kernel (starting Ray per notebook would cost more than
    the notebook); only this test's own processes are stopped afterwards."""
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    yield c.address
    c.shutdown()


def test_every_notebook_is_committed_without_outputs() -> None:
    import nbformat

    names = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == sorted(FIGURE)
    for p in NOTEBOOKS.glob("*.ipynb"):
        nb = nbformat.read(p, as_version=4)
        assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells), p.name
        assert all(not c.get("outputs") and not c.get("execution_count") for c in nb.cells if c.cell_type == "code"), \
            f"{p.name}: clear the outputs before committing"


@pytest.mark.parametrize("name", sorted(FIGURE))
def test_notebook_runs_at_tiny_size(name: str, ray_address: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("ZABRAY_NB_SIZE", "tiny")
    monkeypatch.setenv("ZABRAY_NB_ADDRESS", ray_address)
    monkeypatch.setenv("ZABRAY_NB_OUT", str(tmp_path / "runs"))
    monkeypatch.setenv("ZABRAY_NB_FIGURES", str(tmp_path / "figures"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, timeout=240, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert (tmp_path / "figures" / FIGURE[name]).stat().st_size > 1000
    results = list((tmp_path / "runs").glob("*/results.parquet"))
    assert results, os.listdir(tmp_path / "runs")
    import pandas as pd

    df = pd.concat(pd.read_parquet(r) for r in results)
    assert (df.ops_ok > 0).all(), df[["voters", "observers", "clients", "ops_ok"]]
    # The progress bars are widgets (one output each), not a text line per redraw; and the
    # replicas' data, hundreds of MB per ensemble, is gone once the run is over.
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "stream" and "ops/s" in o.get("text", "")]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs), \
        [o.get("output_type") for o in outputs]
    assert not [p for p in (tmp_path / "runs").glob("*/data/**/*") if p.is_file()]
