"""The network edge shared by replicas and clients: frames written once per burst, TLS contexts, the ensemble secret."""
