"""The driver: start, connect to, write to and break ensembles on Ray, and run workloads and scenarios against them."""
