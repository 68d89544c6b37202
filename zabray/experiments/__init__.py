"""Scaling experiments: an experiment is data (``spec.Experiment``, YAML in
``configs/experiments``), ``runner.run`` executes it on the Ray cluster with client actors
driving the replicas over TCP and returns DataFrames that ``plots`` draws.

This package's own namespace holds only the spec, so validating a YAML file (``zabray
experiment validate``) does not load Ray and pandas; a notebook imports what it runs::

    from zabray.experiments import Experiment, plots
    from zabray.experiments.runner import run
"""

from zabray.experiments.spec import ACTIONS, TARGETS, Experiment, FaultStep, Point

__all__ = ["ACTIONS", "TARGETS", "Experiment", "FaultStep", "Point"]
