"""The master's ZAP handler: lets in the authorized CURVE keys, each as the user it is named after."""

import zmq
import zmq.utils.z85
from zmq.auth.thread import ThreadAuthenticator


class NamingAuthenticator(ThreadAuthenticator):
    def __init__(self, names: dict[bytes, str], context: zmq.Context[zmq.Socket[bytes]]) -> None:
        super().__init__(context)
        self._names = names

    def curve_user_id(self, client_public_key: bytes) -> str:
        return self._names.get(zmq.utils.z85.encode(client_public_key), "?")
