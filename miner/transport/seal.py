"""End-to-end authentication of stage messages that pass through a relay.

CURVE authenticates each connection, so a relay knows who sent it a message and who it delivers to, but the
receiving stage only sees the relay. Each relayed message therefore carries a seal from its sender: a
keyed BLAKE2b MAC over the sender's and receiver's link keys, a stamp and every frame, under a key both ends
derive by X25519 from their CURVE link keys (which are X25519 keys). Only the two ends can make or check it,
so a relay (or anyone who reaches it) can neither forge a message from a stage nor alter one in transit, and
the stamp, strictly increasing per sender, stops it replaying one to the same inbox.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import threading
import time
from collections.abc import Sequence

from Crypto.Protocol.DH import import_x25519_private_key, import_x25519_public_key, key_agreement
from zmq.utils import z85

from client_sdk.protocol.link_keys import is_link_key

STAMP = struct.Struct(">Q")  # nanoseconds since the epoch, strictly increasing per (sender, receiver)
MAC_BYTES = 32
_PERSON = b"bm-relay-seal-v1"  # domain of the derived keys and MACs (16 bytes, BLAKE2b's maximum)


class Seals:
    """Makes and checks seals under one node's link key pair. Thread-safe: a node's outboxes and inbox share
    it."""

    def __init__(self, public: bytes, secret: bytes) -> None:
        self.public = public  # this node's link key pair, Z85
        self._private = import_x25519_private_key(z85.decode(secret))
        self._shared: dict[bytes, bytes] = {}
        self._sent: dict[bytes, int] = {}  # last stamp sent to each receiver
        self._seen: dict[bytes, int] = {}  # last stamp accepted from each sender
        self._lock = threading.Lock()

    def seal(self, receiver: bytes, frames: Sequence[bytes | memoryview]) -> tuple[bytes, bytes]:
        """(stamp, MAC) for a message of `frames` from this node to the holder of `receiver`."""
        with self._lock:
            stamp = max(time.time_ns(), self._sent.get(receiver, 0) + 1)
            self._sent[receiver] = stamp
        packed = STAMP.pack(stamp)
        return packed, self._mac(self.public, receiver, self._key(receiver), packed, frames)

    def check(
        self, sender: bytes, stamp: bytes, mac: bytes, frames: Sequence[bytes | memoryview]
    ) -> str | None:
        """None if `sender` sealed this message for this node and it is newer than every message accepted
        from `sender` before; otherwise why it is refused."""
        if len(stamp) != STAMP.size or len(mac) != MAC_BYTES:
            return "a malformed seal"
        if not is_link_key(sender):
            return "a sender that is not a link key"
        try:
            key = self._key(sender)
        except ValueError:  # a public key X25519 refuses (a point of small order)
            return "a sender whose key X25519 refuses"
        expected = self._mac(sender, self.public, key, stamp, frames)
        if not hmac.compare_digest(expected, mac):
            return "a seal that does not match"
        (value,) = STAMP.unpack(stamp)
        with self._lock:
            if value <= self._seen.get(sender, 0):
                return "a replayed message"
            self._seen[sender] = value
        return None

    def _key(self, peer: bytes) -> bytes:
        with self._lock:
            known = self._shared.get(peer)
        if known is not None:
            return known
        public = import_x25519_public_key(z85.decode(peer))
        key: bytes = key_agreement(
            static_priv=self._private,
            static_pub=public,
            kdf=lambda secret: hashlib.blake2b(secret, digest_size=32, person=_PERSON).digest(),
        )
        with self._lock:
            self._shared[peer] = key
        return key

    @staticmethod
    def _mac(
        sender: bytes, receiver: bytes, key: bytes, stamp: bytes, frames: Sequence[bytes | memoryview]
    ) -> bytes:
        digest = hashlib.blake2b(key=key, digest_size=MAC_BYTES, person=_PERSON)
        for part in (sender, receiver, stamp, *frames):
            digest.update(STAMP.pack(len(part)))  # length-prefixed: frames cannot be re-cut
            digest.update(part)
        return digest.digest()
