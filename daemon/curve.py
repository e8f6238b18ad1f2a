"""ZeroMQ CURVE: who may talk to the master, and as whom.

A key folder, made by `gang keygen DIR`:

    master.key  master.key_secret     the master's key pair
    node.key    node.key_secret       the key pair the node daemons present
    users/NAME.key  NAME.key_secret   one key pair per user of the CLI
    authorized/                       the public keys the master lets in

The master's ROUTER and PUB are CURVE servers: a peer whose public key is not
in ``authorized/`` completes no handshake, so it can neither register, submit,
cancel nor hear a switch. The master takes a client's user name from its key
(the key file's name), not from what the client says, so a user may cancel
only their own jobs (``root`` anyone's).
"""

from __future__ import annotations

# typing's flag without typing's import, nor pathlib's: a submission that reads no key loads this module
# for CurveError alone (cli/quick_submit.py; docs/limits.md, "A submission's imports")
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    # pyzmq only where keys are used: a client without keys (client/zmtp.py) starts without it
    import zmq

    # its thread module loads asyncio: only the master and relays, which serve keys, need it
    from zmq.auth.thread import ThreadAuthenticator

    from gangsched.daemon.zap import NamingAuthenticator

NODE_USER = "node"
NODES_DOMAIN = "nodes"  # the ZAP domain of a master's sockets only nodes may reach: its switch and report sockets


class CurveError(Exception):
    """A key folder that is missing a file it needs, or a key file that cannot be read."""


RESERVED = ("master", NODE_USER)


def keygen(folder: Path, users: list[str]) -> list[Path]:
    """Make the master's, the nodes' and each user's key pairs; authorize all but the master's.

    Secret keys are 0600. A user may not be named like the master's or the
    nodes' key: that user's key would replace the nodes' in ``authorized/``.
    """
    # imported here: zmq.auth loads asyncio and shutil its compressors, which a client reading
    # no key (`gang queue` on a local cluster) would load for nothing
    import shutil

    import zmq.auth

    reserved = [user for user in users if user in RESERVED]
    if reserved:
        raise CurveError(f"{reserved[0]!r} names the {reserved[0]}'s key, not a user's: choose another name")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    (folder / "users").mkdir(mode=0o700, exist_ok=True)
    authorized = folder / "authorized"
    authorized.mkdir(mode=0o700, exist_ok=True)
    made = []
    for name, where in [("master", folder), (NODE_USER, folder), *((user, folder / "users") for user in users)]:
        if not (where / f"{name}.key_secret").exists():
            zmq.auth.create_certificates(where, name)
            made.append(where / f"{name}.key_secret")
        (where / f"{name}.key_secret").chmod(0o600)
        if name != "master":
            shutil.copy(where / f"{name}.key", authorized / f"{name}.key")
    return made


class KeyFolder:
    def __init__(self, path: Path) -> None:
        self.path = path
        if not (path / "master.key").exists():
            raise CurveError(f"{path} holds no master.key: make the keys with `gang keygen {path}`")

    def serve(self, socket: zmq.Socket[bytes], name: str = "master", nodes_only: bool = False) -> None:
        """Make ``socket`` a CURVE server with ``name``'s key (before it binds): the master's, or the
        nodes' on a node relaying for others; ``nodes_only``: a handshake with any key but the nodes' fails
        (the master's switch and report sockets, against ``authenticator``)."""
        public, secret = self._pair(self.path / f"{name}.key_secret")
        socket.curve_publickey, socket.curve_secretkey = public, secret
        socket.curve_server = True
        if nodes_only:
            socket.zap_domain = NODES_DOMAIN.encode()

    def connect_as(self, socket: zmq.Socket[bytes], name: str) -> None:
        """Make ``socket`` a CURVE client presenting ``name``'s key (before it connects)."""
        secret_file = (
            self.path / f"{name}.key_secret" if name == NODE_USER else self.path / "users" / f"{name}.key_secret"
        )
        public, secret = self._pair(secret_file)
        socket.curve_publickey, socket.curve_secretkey = public, secret
        socket.curve_serverkey = self.server_key(relay=False)

    def server_key(self, relay: bool) -> bytes:
        """The public key of what a node connects to: a relay (another node) or the master."""
        return _certificate(self.path / (f"{NODE_USER}.key" if relay else "master.key"))[0]

    def relay_authenticator(self, context: zmq.Context[zmq.Socket[bytes]]) -> ThreadAuthenticator:
        """Started: lets in only the nodes' key, on a relay's sockets."""
        from zmq.auth.thread import ThreadAuthenticator

        nodes_key = _certificate(self.path / f"{NODE_USER}.key")[0]  # Z85, as the handler passes keys

        class NodesOnly:
            def callback(self, domain: str, key: bytes) -> bool:
                return key == nodes_key

        authenticator = ThreadAuthenticator(context)
        authenticator.start()
        authenticator.configure_curve_callback(domain="*", credentials_provider=NodesOnly())
        return authenticator

    def authenticator(self, context: zmq.Context[zmq.Socket[bytes]]) -> NamingAuthenticator:
        """Started: lets in the keys of ``authorized/``, each as the user its file is named after, and on
        the sockets served ``nodes_only`` the nodes' key alone."""
        from gangsched.daemon.zap import NamingAuthenticator

        names = {}
        for key_file in sorted((self.path / "authorized").glob("*.key")):
            names[_certificate(key_file)[0]] = key_file.stem
        authenticator = NamingAuthenticator(names, context, NODE_USER, NODES_DOMAIN)
        authenticator.start()
        return authenticator

    @staticmethod
    def _pair(secret_file: Path) -> tuple[bytes, bytes]:
        if not secret_file.exists():
            raise CurveError(f"no key {secret_file}: make it with `gang keygen`")
        public, secret = _certificate(secret_file)
        if secret is None:
            raise CurveError(f"{secret_file} holds no secret key")
        return public, secret


def _certificate(path: Path) -> tuple[bytes, bytes | None]:
    """A key file's public key and, in a secret key file, its secret key."""
    import zmq.auth  # here: see keygen

    return zmq.auth.load_certificate(path)
