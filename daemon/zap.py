"""The master's ZAP handler: lets in the authorized CURVE keys, each as the user it is named after, and
on the sockets only nodes may reach (those of one ZAP domain) the nodes' key alone."""

import zmq
import zmq.utils.z85
from zmq.auth.thread import ThreadAuthenticator


class _Names:
    """Whether a key may complete a handshake in a domain (pyzmq's credentials provider)."""

    def __init__(self, names: dict[bytes, str], nodes: str, nodes_domain: str) -> None:
        self._names, self._nodes, self._nodes_domain = names, nodes, nodes_domain

    def callback(self, domain: str, key: bytes) -> bool:
        name = self._names.get(key)
        return name == self._nodes if domain == self._nodes_domain else name is not None


class NamingAuthenticator(ThreadAuthenticator):
    def __init__(self, names: dict[bytes, str], context: zmq.Context[zmq.Socket[bytes]], nodes: str,
                 nodes_domain: str) -> None:
        """``names``: each authorized key (Z85) and its user; ``nodes``: the name of the nodes' key, the only
        one let in on the sockets of ``nodes_domain``."""
        super().__init__(context)
        self._names = names
        self._provider = _Names(names, nodes, nodes_domain)
        self._domains = ("*", nodes_domain)

    def start(self) -> None:
        super().start()
        for domain in self._domains:
            self.configure_curve_callback(domain=domain, credentials_provider=self._provider)

    def curve_user_id(self, client_public_key: bytes) -> str:
        return self._names.get(zmq.utils.z85.encode(client_public_key), "?")
