"""Clients of an ensemble over TCP (the data path never goes through Ray): the broadcast client, ZooKeeper sessions, recipes, and the history recorder."""
