"""The ``zabray`` command: one module per area of commands; ``main`` wires them."""
