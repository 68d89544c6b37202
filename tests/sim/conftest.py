from __future__ import annotations

from zabray.sim.simulator import SimOptions, Simulation

# Scripted scenarios: no random faults or client load, fixed protocol parameters.
QUIET = dict(faults=(), fault_rate=0.0, client_rate=0.0)
PARAMS = dict(max_outstanding=1000, diff_window=1000, diff_chunk=100)


def scripted(voters: int = 3, observers: int = 0, seed: int = 7, **params: int) -> Simulation:
    return Simulation(seed, SimOptions(voters=voters, observers=observers, config={**PARAMS, **params}, **QUIET),
                      timeline=True)


def explain(sim: Simulation) -> str:
    return "\n".join([str(v) for v in sim.checker.violations] + sim.timeline[-80:])
