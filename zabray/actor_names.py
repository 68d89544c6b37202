"""The Ray namespace of zabray's actors and the names of an ensemble's long-lived ones. Here,
not beside the actors, so that a handle (``Ensemble.connect``, every ``zabray`` command) finds
them without importing the actors' code, and the actors take them from the same place."""

NAMESPACE = "zabray"


def controller_name(name: str) -> str:
    return f"ensemble:{name}"


def ensemble_of(actor_name: str) -> str | None:
    """The ensemble whose controller has this actor name, or None if it is not a controller's."""
    return actor_name[len("ensemble:"):] if actor_name.startswith("ensemble:") else None


def injector_name(name: str) -> str:
    return f"faults:{name}"
