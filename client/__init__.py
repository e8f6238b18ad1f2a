"""The master's clients: one request, one reply (``connection``, as maps, over ZeroMQ's wire protocol in
plain Python where there are no keys: ``zmtp``), and the same with the protocol's models
(``master_client``). It needs only the protocol: the commands, the web view, the clusters and the
benchmarks reach the master through it."""
