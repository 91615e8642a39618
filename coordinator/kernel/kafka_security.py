"""Kafka client security as Kafka's own tools take it: Java client properties.

``--command-config FILE`` (every ``ordered`` command and the daemon) and the Spark
source's and sink's ``kafka.*`` options use the Java client's names; librdkafka spells
a few of them differently. :func:`translate` maps them:

- ``security.protocol``, ``sasl.mechanism``, ``ssl.key.password``,
  ``ssl.keystore.location``/``ssl.keystore.password`` (PKCS12),
  ``ssl.endpoint.identification.algorithm`` (empty means ``none``): the same names;
- ``sasl.jaas.config`` with ``PlainLoginModule`` or ``ScramLoginModule``:
  ``sasl.username`` and ``sasl.password``;
- ``ssl.truststore.location`` of type PEM: ``ssl.ca.location`` (librdkafka reads no
  JKS: a JKS trust store is refused with a message saying so).

Everything else passes through unchanged, so librdkafka names any key it does not know.
Keys starting with ``ordered.`` are the layer's (``ordered.zookeeper.connect``,
``ordered.zookeeper.auth``) and are returned apart. Secrets never appear in errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from coordinator.kernel.errors import ConfigError

__all__ = ["SECRET_KEYS", "client_config", "load_properties", "redact", "translate"]

SECRET_KEYS: Final = frozenset(
    {
        "sasl.password",
        "sasl.jaas.config",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.key.pem",
        "ordered.zookeeper.auth",
    }
)
"""Keys whose values are secrets: :func:`redact` hides them."""

_JAAS: Final = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(required|requisite|sufficient|optional)\s+(?P<opts>.*?);?\s*$",
    re.DOTALL,
)
_OPTION: Final = re.compile(r'(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|\S+)')
_LOGIN_MODULES: Final = ("PlainLoginModule", "ScramLoginModule")


def load_properties(path: Path) -> dict[str, str]:
    """Read a Java properties file (``key=value`` or ``key: value``, ``#``/``!`` comments).

    Continuation lines (a trailing backslash) are joined, as Java does.

    Raises:
        ConfigError: The file cannot be read.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the command config {path}: {exc.strerror}") from None
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            out[line] = ""
            continue
        out[match.group(1)] = match.group(2)
    return out


def _jaas_credentials(value: str) -> tuple[str, str]:
    match = _JAAS.match(value)
    if match is None or not match.group("module").endswith(_LOGIN_MODULES):
        raise ConfigError(
            "sasl.jaas.config: expected a PlainLoginModule or ScramLoginModule entry "
            '(`... required username="U" password="P";`); the value is not shown'
        )
    options = {k: v[1:-1] if v.startswith('"') else v for k, v in _OPTION.findall(match["opts"])}
    if "username" not in options or "password" not in options:
        raise ConfigError("sasl.jaas.config: needs username and password (the value is not shown)")
    return options["username"], options["password"].replace('\\"', '"')


def translate(props: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Translate Java client properties into (librdkafka settings, ``ordered.`` settings).

    Raises:
        ConfigError: A ``sasl.jaas.config`` that is not a PLAIN/SCRAM login with a user
            and a password, or a JKS trust store.
    """
    kafka: dict[str, str] = {}
    ordered: dict[str, str] = {}
    for key, value in props.items():
        if key.startswith("ordered."):
            ordered[key] = value
        elif key == "sasl.jaas.config":
            kafka["sasl.username"], kafka["sasl.password"] = _jaas_credentials(value)
        elif key == "ssl.truststore.location":
            kind = props.get("ssl.truststore.type", "JKS").upper()
            if kind != "PEM":
                raise ConfigError(
                    f"ssl.truststore.location: librdkafka cannot read a {kind} trust store; "
                    "convert it to PEM and set ssl.truststore.type=PEM (or ssl.ca.location)"
                )
            kafka["ssl.ca.location"] = value
        elif key in ("ssl.truststore.type", "ssl.truststore.password", "ssl.keystore.type"):
            continue  # consumed above, or implied by librdkafka (PKCS12 key stores)
        elif key == "ssl.endpoint.identification.algorithm":
            kafka[key] = value or "none"
        else:
            kafka[key] = value
    return kafka, ordered


def redact(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` with every secret value replaced by ``***`` (for logs and output)."""
    return {k: ("***" if k in SECRET_KEYS else v) for k, v in settings.items()}


def client_config(path: Path | str) -> dict[str, str]:
    """A client configuration from a Java properties file, ready for the wrappers.

    ``OrderedProducer(client_config("client.properties"))``: the Kafka settings
    translated for librdkafka plus the ``ordered.`` ones (``ordered.zookeeper.connect``,
    ``ordered.zookeeper.auth``) as they are; add ``group.id`` for a consumer.

    Raises:
        ConfigError: The file cannot be read or holds a malformed setting.
    """
    kafka, ordered = translate(load_properties(Path(path)))
    return {**kafka, **ordered}
