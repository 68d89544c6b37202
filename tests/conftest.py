"""Every Ray the suite starts (its own local clusters, ``Cluster`` nodes, the CLI's head) runs
its workers at nice 0, as a Ray that ``zabray up`` or ``Ensemble.start`` starts does. A test of
the other case (a cluster started without it) removes the variable for its own cluster."""

from zabray.driver.rayhead import unniced_workers

unniced_workers()
