"""Authenticated, encrypted stage links: ZeroMQ CURVE with each node's long-lived transport key.

A node's public link key is bound to its registered identity when it joins (the join is signed by its wallet)
and reaches its peers in their assignments. Every inbox is a CURVE server under the node's key: a peer that
does not speak CURVE never completes the handshake, and every message that arrives carries the key its sender
proved it holds (ZAP's User-Id). The inbox takes messages only from the keys its current assignment allows and
drops the rest; the stage then checks the sender against the kind of message (activations from the previous
stage only, tokens from the last, requests and control from its own node). Every outbox is a CURVE client that
knows the key of the inbox it connects to, so it cannot be pointed at an impostor.

Keys are checked per message rather than refused at the handshake because libzmq never reconnects after a
refused handshake: a peer whose assignment reached it a moment before ours would lose its link for good.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import zmq
from zmq.auth import CURVE_ALLOW_ANY
from zmq.auth.thread import ThreadAuthenticator

from client_sdk.protocol.link_keys import is_link_key
from miner.transport.seal import Seals


@dataclass(frozen=True)
class LinkKeys:
    """A CURVE key pair, both halves Z85-encoded (40 ASCII bytes)."""

    public: bytes
    secret: bytes

    @classmethod
    def generate(cls) -> LinkKeys:
        public, secret = zmq.curve_keypair()
        return cls(public, secret)

    @classmethod
    def load_or_create(cls, path: Path) -> LinkKeys:
        """The pair kept at `path` (public and secret key, one per line), created there, readable by its owner
        only, the first time."""
        if path.is_file():
            lines = path.read_bytes().split()
            if len(lines) != 2 or not all(is_link_key(line) for line in lines):
                raise ValueError(f"{path} does not hold a link key pair")
            keys = cls(lines[0], lines[1])
            if zmq.curve_public(keys.secret) != keys.public:
                raise ValueError(f"{path}: the public key is not the secret key's")
            return keys
        keys = cls.generate()
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(keys.public + b"\n" + keys.secret + b"\n")
        return keys


class LinkSecurity:
    """One node's CURVE setup on its ZeroMQ context: its keys, a ZAP handler that names each connection's key,
    and the keys whose messages its inboxes take (`allow`; its own always)."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], keys: LinkKeys) -> None:
        self.keys = keys
        self.seals = Seals(keys.public, keys.secret)  # for messages through a relay
        self._allowed: frozenset[bytes] = frozenset({keys.public})
        self._lock = threading.Lock()
        self._authenticator = ThreadAuthenticator(context)
        self._authenticator.start()
        self._authenticator.configure_curve(domain="*", location=CURVE_ALLOW_ANY)

    def allow(self, peers: Iterable[bytes]) -> None:
        """From now on, take messages from these public keys and our own."""
        with self._lock:
            self._allowed = frozenset({self.keys.public, *peers})

    @property
    def allowed(self) -> frozenset[bytes]:
        """The keys whose messages are taken now (a relayed inbox names them to its relay)."""
        with self._lock:
            return self._allowed

    def admits(self, sender: bytes) -> bool:
        """Whether a message from the holder of `sender` is taken."""
        with self._lock:
            return sender in self._allowed

    def serve(self, socket: zmq.Socket[bytes]) -> None:
        """Makes `socket` a CURVE server under our key (before it binds)."""
        socket.curve_secretkey = self.keys.secret
        socket.curve_publickey = self.keys.public
        socket.curve_server = True

    def client(self, socket: zmq.Socket[bytes], server_key: bytes) -> None:
        """Makes `socket` a CURVE client that talks only to the holder of `server_key` (before it
        connects)."""
        socket.curve_secretkey = self.keys.secret
        socket.curve_publickey = self.keys.public
        socket.curve_serverkey = server_key

    def stop(self) -> None:
        self._authenticator.stop()
