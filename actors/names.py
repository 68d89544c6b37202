"""The Ray names of an ensemble's long-lived actors, in the ``zabray`` namespace. A module of
its own so that a handle (``Ensemble.connect``, every ``zabray`` command) finds them without
importing the actors' code."""

NAMESPACE = "zabray"


def controller_name(name: str) -> str:
    return f"ensemble:{name}"


def injector_name(name: str) -> str:
    return f"faults:{name}"
