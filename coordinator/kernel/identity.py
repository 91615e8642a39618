"""The one place that names this process: ids of producers, consumers, controllers.

Every identity string of the project is built by :func:`make_identity`, so they all
take the host name and process id the same way. The formats (unchanged from before
they were gathered here):

* a controller or daemon, :func:`process_identity`: ``{host}:{pid}`` (the holder of a
  topic lock, a candidate in the daemons' election);
* a consumer's position-service member id, :func:`member_id`:
  ``{host}-{pid}-{8 hex}``;
* a producer's registration id, :func:`producer_id`: ``p-{host}-{pid}-{16 hex}``, so
  a barrier's "waiting for p-..." names the machine to look at (the host is cut to its
  first 63 characters, and anything but letters, digits, ``.``, ``_`` and ``-`` becomes
  ``_``, to stay a short znode name).

The random suffix tells apart two clients of one process and a client re-created in
a process whose id the operating system reused.
"""

from __future__ import annotations

import os
import re
import socket
import uuid

__all__ = [
    "host_name",
    "make_identity",
    "member_id",
    "process_identity",
    "producer_id",
    "random_token",
]


def host_name() -> str:
    """This machine's host name (as registrations record it)."""
    return socket.gethostname()


def make_identity(
    *, prefix: str = "", host: bool = True, sep: str = ":", random_hex: int = 0
) -> str:
    """Build an identity string: ``[prefix sep][host sep]pid[sep random]``.

    Args:
        prefix: A leading tag (for example ``"p"`` for producers); none if empty.
        host: Include the host name.
        sep: The separator between the parts.
        random_hex: Append this many random hex digits (0: none; at most 32).

    Returns:
        The identity.

    Raises:
        ValueError: ``random_hex`` is not between 0 and 32.
    """
    if not 0 <= random_hex <= 32:
        raise ValueError(f"random_hex must be between 0 and 32, got {random_hex}")
    parts = [prefix] if prefix else []
    if host:
        parts.append(host_name())
    parts.append(str(os.getpid()))
    if random_hex:
        parts.append(random_token(random_hex))
    return sep.join(parts)


def process_identity() -> str:
    """``{host}:{pid}``: a controller's lock identifier, a daemon's election name."""
    return make_identity()


def member_id() -> str:
    """``{host}-{pid}-{8 hex}``: a consumer's member id in the position service."""
    return make_identity(sep="-", random_hex=8)


def producer_id() -> str:
    """``p-{host}-{pid}-{16 hex}``: a producer's registration id (a znode name)."""
    host = re.sub(r"[^A-Za-z0-9._-]", "_", host_name())[:63]
    return make_identity(prefix=f"p-{host}", host=False, sep="-", random_hex=16)


def random_token(digits: int = 8) -> str:
    """``digits`` random hex digits (at most 32): a unique suffix for client and group ids.

    Raises:
        ValueError: ``digits`` is not between 1 and 32.
    """
    if not 1 <= digits <= 32:
        raise ValueError(f"digits must be between 1 and 32, got {digits}")
    return uuid.uuid4().hex[:digits]
