"""The producer's configuration under its first names.

:mod:`ordered.producer.config` is the module now (named as :mod:`ordered.consumer_config`
is); this one keeps ``from ordered.config import ...`` working: ``OrderedSettings`` is
:class:`~ordered.producer.config.ProducerSettings` and ``ORDERED_KEYS`` is
:data:`~ordered.producer.config.PRODUCER_KEYS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ordered.producer.config import (
    DEFAULT_DELIVERY_TIMEOUT_MS,
    ORDERED_PREFIX,
    PRODUCER_KEYS,
    ProducerConfig,
    ProducerSettings,
    parse_bool,
    split_producer_config,
)

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "ORDERED_KEYS",
    "ORDERED_PREFIX",
    "OrderedSettings",
    "ProducerConfig",
    "parse_bool",
    "split_producer_config",
]

OrderedSettings = ProducerSettings
"""The first name of :class:`~ordered.producer.config.ProducerSettings`."""

ORDERED_KEYS: Final[Mapping[str, str]] = PRODUCER_KEYS
"""The first name of :data:`~ordered.producer.config.PRODUCER_KEYS`."""
