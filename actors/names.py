"""The Ray namespace of zabray's actors, the names of an ensemble's long-lived ones, and the Ray
setting that decides their workers' niceness. A module of its own, importing nothing, so that a
handle (``Ensemble.connect``, every ``zabray`` command) finds the actors without importing their
code, and the actors take the names from the same place."""

NAMESPACE = "zabray"

# Ray's setting for the niceness of the workers it starts (15 unless set): replicas are servers,
# not batch work, so every Ray that zabray starts sets it to 0 (``zabray.driver.rayhead``).
WORKER_NICENESS = "RAY_worker_niceness"


def controller_name(name: str) -> str:
    return f"ensemble:{name}"


def ensemble_of(actor_name: str) -> str | None:
    """The ensemble whose controller has this actor name, or None if it is not a controller's."""
    return actor_name[len("ensemble:"):] if actor_name.startswith("ensemble:") else None


def injector_name(name: str) -> str:
    return f"faults:{name}"
