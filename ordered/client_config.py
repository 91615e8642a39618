"""The one splitter of a client's configuration dict, driven by the settings table.

``OrderedProducer`` and ``OrderedConsumer`` (and their serializing variants) take the
dict their confluent client takes plus ``ordered.``-prefixed keys. Both halves are split
here: the librdkafka keys go on (each client then changes the few it must, see
:mod:`ordered.producer.config` and :mod:`ordered.consumer_config`), and the
``ordered.`` keys are checked and parsed against :data:`ordered.settings.SETTINGS` for
the client's :class:`~ordered.settings.Role` into its settings view.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ordered.settings import Role, parse_settings, split_ordered

__all__ = ["split_client_config"]

V = TypeVar("V")


def split_client_config(
    config: Mapping[str, Any] | None,
    overrides: Mapping[str, Any] | None,
    role: Role,
    view: Callable[..., V],
) -> tuple[dict[str, Any], V]:
    """Split a client's configuration into its librdkafka keys and its ``ordered.`` view.

    Args:
        config: The configuration dict, as given to confluent; not modified.
        overrides: Keyword-argument settings; they win over ``config``.
        role: The client whose settings the ``ordered.`` keys must be.
        view: The settings view built from the parsed settings (attribute -> value).

    Returns:
        A new dict of every non-``ordered.`` key, and the view.

    Raises:
        ConfigError: ``config`` is not a mapping, a key is not a string, an unknown
            ``ordered.`` key, a missing required one, or a malformed value.
    """
    kafka, ordered = split_ordered(config, overrides)
    return kafka, view(**parse_settings(ordered, role))
