"""confluent's answers for a client that was never built: no configuration, no ``__init__``.

confluent-kafka's ``Producer()`` and ``Consumer()`` refuse a missing or non-dict
configuration with ``TypeError('expected configuration dict')`` before looking at any
setting; :func:`require_config` gives the wrappers the same first check, before the
``ordered.zookeeper.connect`` check.

A subclass of confluent's clients whose ``__init__`` never ran raises ``RuntimeError``
("Producer has been closed", "Consumer closed") from every method. The wrappers keep
their parts as instance attributes set by ``__init__``; :class:`Unbuilt` is the class
level default of those parts, so a method reached on an unbuilt instance raises the same
``RuntimeError`` instead of an ``AttributeError``.

:func:`quiet_kazoo`: before a client is built, kazoo's connection attempts stay off an
unconfigured application's stderr.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = ["Unbuilt", "quiet_kazoo", "require_config"]


def quiet_kazoo() -> None:
    """Give kazoo's logger a ``NullHandler``, so an unconfigured application sees no lines.

    A constructor whose ZooKeeper is unreachable would otherwise print each refused
    connection (about 15 lines) through Python's last-resort handler before its
    ``StoreUnavailableError``; confluent's clients print nothing of ZooKeeper. An
    application that configures logging still gets kazoo's records through propagation
    (the library practice of the ``logging`` documentation). Idempotent.
    """
    logger = logging.getLogger("kazoo")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


def require_config(config: object, kwargs: Mapping[str, Any]) -> None:
    """Raise confluent's ``TypeError`` for a missing or non-mapping configuration.

    Args:
        config: The positional configuration given to the constructor.
        kwargs: The keyword settings given to it (confluent accepts them alone).

    Raises:
        TypeError: ``expected configuration dict``, as confluent's constructors.
    """
    if config is None and not kwargs:
        raise TypeError("expected configuration dict")
    if config is not None and not isinstance(config, Mapping):
        raise TypeError("expected configuration dict")


class Unbuilt:
    """A part of a client whose ``__init__`` never ran: every use raises ``RuntimeError``.

    Args:
        message: confluent's message for the client (``"Producer has been closed"``).
    """

    __slots__ = ("_message",)

    def __init__(self, message: str) -> None:
        self._message = message

    def _fail(self) -> NoReturn:
        raise RuntimeError(self._message)

    def __getattr__(self, name: str) -> NoReturn:
        """Any attribute of the missing part: the client was never built."""
        if name.startswith("__"):
            raise AttributeError(name)
        self._fail()

    def __len__(self) -> int:
        """Nothing is queued: ``len()`` of an unbuilt confluent producer is 0 too."""
        return 0

    def __bool__(self) -> bool:
        """Truth of the missing part (``if self._closed``-style checks)."""
        self._fail()

    def __getitem__(self, key: Any) -> NoReturn:
        """Indexing the missing part."""
        self._fail()
