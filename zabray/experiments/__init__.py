"""Scaling experiments: an experiment is data (``Experiment``, YAML in ``configs/experiments``),
``run`` executes it on the Ray cluster with client actors driving the replicas over TCP, and
returns DataFrames that ``plots`` draws. See the README's "Experiments" section."""

from zabray.experiments.spec import ACTIONS, TARGETS, Experiment, FaultStep, Point

__all__ = ["ACTIONS", "TARGETS", "Experiment", "FaultStep", "Point", "run", "load_results", "ExperimentResult"]


def __getattr__(name: str) -> object:
    # pandas and Ray load only when an experiment runs, so validating a YAML file stays cheap.
    if name in ("run", "load_results", "ExperimentResult", "describe_cluster"):
        from zabray.experiments import runner

        return getattr(runner, name)
    if name == "describe_machine":
        from zabray.experiments.machine import describe_machine

        return describe_machine
    if name == "plots":
        import importlib

        return importlib.import_module("zabray.experiments.plots")
    raise AttributeError(name)
