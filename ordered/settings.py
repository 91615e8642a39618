"""The one table of ``ordered.`` settings, shared by every reader of settings.

Every setting of the ordering layer is one :class:`Setting` in :data:`SETTINGS`: its
key, the attribute it becomes, its default (stated here and nowhere else), how its value
is checked, what it means and who reads it (:class:`Role`: the producer, the consumer,
the Spark source; the Spark sink hands its ``ordered.`` options to a producer).
The value parsers the table names (:func:`parse_str`, :func:`parse_root`,
:func:`parse_zookeeper_connect`, :func:`parse_bool`, :func:`parse_int`) live here too;
the command line checks ``--zookeeper`` with the same rule. So does the split of a client's dict
(:func:`split_client_config`: librdkafka's keys, and the ``ordered.`` keys parsed into
the client's view, whose ZooKeeper security fields :class:`ZkSecuritySettings` declares
once for both clients).

:mod:`ordered.producer.config` and :mod:`ordered.consumer_config` declare their settings
objects with :func:`setting_field` and :func:`settings_view` (defaults, keys and the
set of fields all come from this table; a view that drifts from it fails at import),
parse with :func:`parse_settings`, and remove every ``ordered.`` key with
:func:`split_ordered` before the dict reaches librdkafka (which rejects keys it does
not know). ``spark_source.options`` parses its ``ordered.`` options with the same
function, so one value is accepted or refused alike by all three. A key that starts
with ``ordered.`` but is not in the table (for that reader) is a
:class:`~coordinator.kernel.errors.ConfigError` naming it, so a typo never silently turns a
setting off.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from coordinator.kernel import zk_tls
from coordinator.kernel.errors import ConfigError
from coordinator.kernel.hooks import check_hooks
from coordinator.kernel.zk_auth import NO_AUTH, ZkAuth

_log = logging.getLogger("ordered.settings")

__all__ = [
    "COMMIT_MODES",
    "INT32_MAX",
    "INT64_MAX",
    "ORDERED_PREFIX",
    "REMOVED",
    "SETTINGS",
    "SWITCH_MODES",
    "VIOLATION_POLICIES",
    "IntRange",
    "Role",
    "Setting",
    "ZkSecuritySettings",
    "default",
    "keys_for",
    "parse_bool",
    "parse_int",
    "parse_root",
    "parse_settings",
    "parse_str",
    "parse_zookeeper_connect",
    "setting_field",
    "settings_view",
    "split_client_config",
    "split_ordered",
]

_View = TypeVar("_View", bound=type)

ORDERED_PREFIX: Final = "ordered."
"""Every setting of the ordering layer starts with this prefix."""

VIOLATION_POLICIES: Final = ("log", "raise")
"""Valid values of ``ordered.violation.policy``."""

COMMIT_MODES: Final = ("auto", "application")
"""Valid values of ``ordered.commit.mode``."""

SWITCH_MODES: Final = ("track", "pause")
"""Valid values of ``ordered.switch.mode``."""

INT32_MAX: Final = 2**31 - 1
"""The largest Java ``int``: kazoo packs the ZooKeeper session timeout (ms) as one,
librdkafka's integer properties are C ``int``, and Kafka's protocol counts partitions
with one."""

CONSUMER_SESSION_TIMEOUT_MS: Final = 18_000
"""A consumer's default ZooKeeper session timeout. kazoo pings after a third of it without
traffic, and an idle consumer sends nothing else: 18 s makes that one request per 6 s
(0.17/s), where the clients' 10 s made it 0.33/s. 18 s is Kafka's own brokers' default
``zookeeper.session.timeout.ms``. The price: a killed consumer's ZooKeeper nodes outlive
it by up to 18 s (a transition waits for it at most the barrier's eviction bound, 16 s),
while Kafka's own group keeps a killed member for ``session.timeout.ms``, 45 s."""

INT64_MAX: Final = 2**63 - 1
"""The largest Java ``long``: Kafka's offsets and millisecond timestamps."""

_TRUE: Final = frozenset({"true", "t", "1"})
_DECIMAL: Final = re.compile(r"-?[0-9]{1,40}")
"""A decimal integer of at most 40 digits (more is out of every range; a longer string is
refused before ``int()`` spends time on it)."""
_FALSE: Final = frozenset({"false", "f", "0"})


class Role(enum.Flag):
    """Who reads a setting.

    Attributes:
        PRODUCER: ``OrderedProducer`` (and so the Spark sink, which builds one).
        CONSUMER: ``OrderedConsumer``.
        SOURCE: The Spark ``ordered-kafka`` source.
        BOTH: Both clients.
        ALL: Both clients and the Spark source.
    """

    PRODUCER = enum.auto()
    CONSUMER = enum.auto()
    SOURCE = enum.auto()
    BOTH = PRODUCER | CONSUMER
    ALL = PRODUCER | CONSUMER | SOURCE


# --- value parsers: a string, a znode root, a connect string (the command line checks
# ``--zookeeper`` with the same rule), a bool, an int -----------------------------------


def parse_str(key: str, value: Any) -> str:
    """Parse a non-empty string setting (stripped).

    Raises:
        ConfigError: Not a string, empty, or not encodable as UTF-8 (a lone surrogate:
            ZooKeeper, Kafka headers and librdkafka take UTF-8 only).
    """
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{key}: expected UTF-8 text, got {value!r}") from None
    return value.strip()


def _znode_chars_ok(text: str) -> bool:
    """ZooKeeper's ``PathUtils.validatePath`` character rule."""
    for ch in text:
        c = ord(ch)
        if c == 0 or 0x01 <= c <= 0x1F or 0x7F <= c <= 0x9F:
            return False
        if 0xD800 <= c <= 0xF8FF or 0xFFF0 <= c <= 0xFFFF:
            return False
    return True


def parse_root(key: str, value: Any) -> str:
    """Parse an absolute znode path (``/ordered``): no empty, ``.`` or ``..`` part, no
    character ZooKeeper refuses.

    Raises:
        ConfigError: The path is malformed; the message names the key.
    """
    root = parse_str(key, value)
    if not root.startswith("/") or (len(root) > 1 and root.endswith("/")):
        raise ConfigError(f"{key}: expected an absolute znode path like /ordered, got {root!r}")
    parts = root.split("/")[1:]
    if root != "/" and any(part in ("", ".", "..") for part in parts):
        raise ConfigError(f"{key}: a znode path has no empty, '.' or '..' component, got {root!r}")
    if not _znode_chars_ok(root):
        raise ConfigError(
            f"{key}: {root!r} holds a character ZooKeeper refuses in a path (control "
            "characters, U+D800-U+F8FF, U+FFF0-U+FFFF)"
        )
    return root


def parse_zookeeper_connect(key: str, value: Any) -> str:
    """Parse a ZooKeeper connect string: ``host[:port][,host[:port]...][/chroot]``.

    Ports are 1 to 65535 (an IPv6 host is bracketed: ``[::1]:2181``); a chroot is a
    znode path. The same rule checks ``--zookeeper`` on the command line.

    Raises:
        ConfigError: The string is malformed; the message names the key and the part.
    """
    text = parse_str(key, value)
    hosts, slash, chroot = text.partition("/")
    if not hosts:
        raise ConfigError(f"{key}: expected host:port[,host:port...][/chroot], got {text!r}")
    for part in hosts.split(","):
        host, port = part, "2181"
        if part.startswith("["):
            close = part.find("]")
            if close < 0 or (part[close + 1 :] and not part[close + 1 :].startswith(":")):
                raise ConfigError(f"{key}: bad ZooKeeper host {part!r} in {text!r}")
            host, port = part[: close + 1], part[close + 2 :] or "2181"
        elif ":" in part:
            host, port = part.rsplit(":", 1)
        host = host.strip()
        if not host or (not host.startswith("[") and ":" in host):
            raise ConfigError(
                f"{key}: bad ZooKeeper host {part!r} in {text!r} (expected host:port)"
            )
        if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
            raise ConfigError(f"{key}: bad ZooKeeper port {port!r} in {text!r} (expected 1-65535)")
    if slash:
        parse_root(f"{key} (chroot)", "/" + chroot)
    return text


def parse_bool(key: str, value: Any) -> bool:
    """Parse a boolean setting the way librdkafka does.

    Args:
        key: The setting's name, for the error message.
        value: A ``bool``, the integers 0/1, or one of ``true``/``t``/``1``/``false``/
            ``f``/``0`` (any case).

    Raises:
        ConfigError: Any other value.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ConfigError(f"{key}: expected a boolean (true or false), got {value!r}")


def parse_int(key: str, value: Any, minimum: int, maximum: int = INT32_MAX) -> int:
    """Parse an integer setting (an ``int`` or its decimal string) in ``[minimum, maximum]``.

    Raises:
        ConfigError: Not an integer (``bool`` included), or out of range; the message
            names the key, the value and the allowed range.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        number = int(value.strip())
    else:
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if number < minimum:
        raise ConfigError(f"{key}: must be >= {minimum}, got {number}")
    if number > maximum:
        raise ConfigError(f"{key}: must be between {minimum} and {maximum}, got {_short(number)}")
    return number


def _short(number: int) -> str:
    """An integer for a message: a huge one is cut, so the message stays one line."""
    text = str(number)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} digits)"


def _one_of(choices: tuple[str, ...]) -> Callable[[str, Any], str]:
    """A parser for a setting that names one of ``choices`` (any case)."""

    def parse(key: str, value: Any) -> str:
        choice = parse_str(key, value).lower()
        if choice not in choices:
            raise ConfigError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")
        return choice

    return parse


_policy = _one_of(VIOLATION_POLICIES)
_commit_mode = _one_of(COMMIT_MODES)
_switch_mode = _one_of(SWITCH_MODES)


def _zk_auth(key: str, value: Any) -> ZkAuth:
    return ZkAuth.parse(value, key)


@dataclass(frozen=True, slots=True)
class IntRange:
    """The parser of an integer setting in ``[minimum, maximum]``: the range is declared
    once, in the table entry that uses it, and shown in the settings reference."""

    minimum: int
    maximum: int

    def __call__(self, key: str, value: Any) -> int:
        return parse_int(key, value, self.minimum, self.maximum)

    def __str__(self) -> str:
        return f"{self.minimum} to {self.maximum}"


@dataclass(frozen=True, slots=True)
class Setting:
    """One ``ordered.`` setting.

    Attributes:
        key: The configuration key (``ordered.`` prefix included).
        attr: The attribute of the parsed settings object.
        default: The default (``None``: required).
        parse: ``parse(key, value)`` checks and converts a value.
        doc: What it means, one line.
        role: Which wrapper reads it.
        consumer_default: The consumer's default where it differs from ``default``
            (``None``: the same).
    """

    key: str
    attr: str
    default: Any
    parse: Callable[[str, Any], Any]
    doc: str
    role: Role = Role.BOTH
    consumer_default: Any = None

    def default_for(self, role: Role | None) -> Any:
        """The default ``role`` gets: the consumer's own where it has one (``None``:
        the table's ``default``)."""
        if self.consumer_default is not None and role is Role.CONSUMER:
            return self.consumer_default
        return self.default

    @property
    def summary(self) -> str:
        """``doc``, with the allowed range of an integer setting (``1 to 2147483647``)."""
        return f"{self.doc} ({self.parse})" if isinstance(self.parse, IntRange) else self.doc


SETTINGS: Final[tuple[Setting, ...]] = (
    Setting(
        "ordered.zookeeper.connect",
        "zookeeper_connect",
        None,
        parse_zookeeper_connect,
        "ZooKeeper connect string, optionally with a chroot (required)",
        Role.ALL,
    ),
    Setting(
        "ordered.zookeeper.root",
        "zookeeper_root",
        "/ordered",
        parse_root,
        "root znode of the layout store",
        Role.ALL,
    ),
    Setting(
        "ordered.zookeeper.auth",
        "zookeeper_auth",
        NO_AUTH,
        _zk_auth,
        "ZooKeeper credentials, digest:USER:PASSWORD or sasl:USER:PASSWORD (never shown)",
        Role.ALL,
    ),
    Setting(
        "ordered.zookeeper.session.timeout.ms",
        "zookeeper_session_timeout_ms",
        10_000,
        IntRange(1_000, INT32_MAX),
        "ZooKeeper session timeout (kazoo sends it as a 32-bit int and waits a fraction "
        "of it for the connect handshake, so under a second it can time out before the "
        "server answers; the server negotiates it into its own minimum and maximum, "
        "2 and 20 ticks by default); a consumer's default is 18000, as Kafka's brokers' "
        "zookeeper.session.timeout.ms: an idle consumer's only requests are the session's "
        "pings, one per third of it",
        Role.ALL,
        consumer_default=CONSUMER_SESSION_TIMEOUT_MS,
    ),
    Setting(
        zk_tls.ENABLE,
        "zookeeper_ssl_client_enable",
        False,
        parse_bool,
        "connect to ZooKeeper over TLS (its secureClientPort; as Kafka's "
        "zookeeper.ssl.client.enable)",
        Role.ALL,
    ),
    Setting(
        zk_tls.CA,
        "zookeeper_ssl_ca_location",
        "",
        zk_tls.parse_pem_file,
        "PEM file of the CA certificate(s) that signed ZooKeeper's (empty: the system's)",
        Role.ALL,
    ),
    Setting(
        zk_tls.CERTIFICATE,
        "zookeeper_ssl_certificate_location",
        "",
        zk_tls.parse_pem_file,
        "PEM client certificate for ZooKeeper, for a server that asks for one (with the key)",
        Role.ALL,
    ),
    Setting(
        zk_tls.KEY,
        "zookeeper_ssl_key_location",
        "",
        zk_tls.parse_pem_file,
        "unencrypted PEM key of that client certificate",
        Role.ALL,
    ),
    Setting(
        zk_tls.IDENTIFICATION,
        "zookeeper_ssl_endpoint_identification_algorithm",
        "https",
        zk_tls.parse_identification,
        "https: ZooKeeper's certificate must name the host connected to; none: not checked",
        Role.ALL,
    ),
    Setting(
        "ordered.epoch.header",
        "epoch_header",
        False,
        parse_bool,
        "add the layout epoch header to every routed record (an opt-in audit aid; "
        "the producer benchmark ran at about 0.4 of the default's throughput with it)",
        Role.PRODUCER,
    ),
    Setting(
        "ordered.switch.mode",
        "switch_mode",
        "track",
        _switch_mode,
        "while a route switch waits for this producer's older records: track (records "
        "are sent at once, each with a delivery report the barrier counts) or pause "
        "(produce raises BufferError until they are delivered: poll() and retry; "
        "delivery.report.only.error is then confluent's own, successes cost nothing)",
        Role.PRODUCER,
    ),
    Setting(
        "ordered.epoch.header.name",
        "epoch_header_name",
        "ordered.epoch",
        parse_str,
        "name of the epoch header (written by producers, audited by consumers)",
    ),
    Setting(
        "ordered.violation.policy",
        "violation_policy",
        "log",
        _policy,
        "what to do with a misplaced record: log or raise",
        Role.CONSUMER,
    ),
    Setting(
        "ordered.epoch.header.audit",
        "header_audit",
        False,
        parse_bool,
        "check each record's epoch header",
        Role.CONSUMER,
    ),
    Setting(
        "ordered.key.audit",
        "key_audit",
        True,
        parse_bool,
        "check each keyed record's partition against the layout",
        Role.CONSUMER,
    ),
    Setting(
        "ordered.gate.poll.interval.ms",
        "gate_poll_interval_ms",
        100,
        IntRange(1, 86_400_000),
        "how often a closed gate is re-checked",
        Role.CONSUMER,
    ),
    Setting(
        "ordered.audit.every",
        "audit_every",
        16,
        IntRange(1, INT32_MAX),
        "audit one record in N on the fast path (1: every record)",
        Role.CONSUMER,
    ),
    Setting(
        "ordered.layout.check.max.requests.per.s",
        "layout_check_max_requests_per_s",
        16,
        IntRange(0, 1_000_000),
        "most ZooKeeper requests per second the layout checks of fetched batches send, "
        "on average (two checks may go back to back after a quiet spell; 0: no bound, a "
        "check for every batch above the covered offsets)",
        Role.CONSUMER,
    ),
    Setting(
        "ordered.commit.mode",
        "commit_mode",
        "auto",
        _commit_mode,
        "auto: the consumer commits boundaries and rewinds itself; application: it never "
        "commits, a boundary passes once the application's own commit (plain or "
        "transactional) covers it (needs enable.auto.commit=false)",
        Role.CONSUMER,
    ),
    Setting(
        "ordered.positions",
        "positions",
        True,
        parse_bool,
        "open gates sooner through the position service",
        Role.CONSUMER,
    ),
    Setting(
        "ordered.hooks",
        "hooks",
        (),
        check_hooks,
        "a list of hook objects that receive the client's events (coordinator.kernel.hooks), "
        "e.g. ordered.hooks.PrometheusHooks",
        Role.BOTH,
    ),
)
"""Every ``ordered.`` setting of both wrappers."""

_BY_ATTR: Final[dict[str, Setting]] = {s.attr: s for s in SETTINGS}

REMOVED: Final[dict[str, str]] = {
    "ordered.fetch.favour.sources": "the sources-first favour was removed, as it did not "
    "open a new partition's gate sooner; the consumer fetches every partition alike, as "
    "it did with this setting false",
}
"""Keys that were settings once -> why they went. Accepted and ignored, with a warning
that gives the reason, as Kafka's clients warn of a configuration they do not use: a
configuration written for the release before still starts (a rolling upgrade), and the
log tells the operator to delete the key."""


def default(attr: str, role: Role | None = None) -> Any:
    """The default ``role`` gets of the setting whose attribute is ``attr``.

    Raises:
        KeyError: No such setting.
    """
    return _BY_ATTR[attr].default_for(role)


def keys_for(role: Role) -> dict[str, str]:
    """Key -> description (with its default) of the settings ``role`` reads."""
    out: dict[str, str] = {}
    for s in SETTINGS:
        if s.role & role:
            value = s.default_for(role)
            default = "" if value is None else f" (default {_show(value)})"
            out[s.key] = s.summary + default
    return out


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value in ((), ""):
        return "none"
    return str(value)


def split_ordered(
    config: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Merge ``config`` and ``overrides`` and split them into (librdkafka, ``ordered.``).

    Args:
        config: The configuration dict, as given to confluent; not modified.
        overrides: Keyword-argument settings; they win over ``config`` (as confluent's
            ``Producer(config, **kwargs)`` does).

    Raises:
        ConfigError: ``config`` is not a mapping, or a key is not a string.
    """
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError(f"the configuration must be a dict, got {type(config).__name__}")
    merged: dict[str, Any] = dict(config or {})
    merged.update(overrides or {})
    kafka: dict[str, Any] = {}
    ordered: dict[str, Any] = {}
    for key, value in merged.items():
        if not isinstance(key, str):
            raise ConfigError(f"configuration keys must be strings, got {key!r}")
        (ordered if key.startswith(ORDERED_PREFIX) else kafka)[key] = value
    return kafka, ordered


def parse_settings(
    settings: Mapping[str, Any], role: Role, *, require: bool = True
) -> dict[str, Any]:
    """Check and convert the ``ordered.`` keys a reader was given.

    Args:
        settings: Only ``ordered.`` keys.
        role: The reader: keys of the other readers only are unknown here.
        require: ``False`` leaves a missing required setting out of the result instead
            of refusing it (the Spark source reads plain topics without ZooKeeper).

    Returns:
        Attribute -> value for every setting of ``role``, defaults filled in.

    Raises:
        ConfigError: An unknown key, a missing required one, or a malformed value; the
            message names the key. A removed key (:data:`REMOVED`) is only warned of.
    """
    for key in sorted(settings):
        if key in REMOVED:
            _log.warning(
                "%s is no longer a setting (%s); it is ignored: delete it", key, REMOVED[key]
            )
    settings = {k: v for k, v in settings.items() if k not in REMOVED}
    known = {s.key for s in SETTINGS if s.role & role}
    unknown = sorted(key for key in settings if key not in known)
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    out: dict[str, Any] = {}
    for s in SETTINGS:
        if not s.role & role:
            continue
        if s.key in settings:
            out[s.attr] = s.parse(s.key, settings[s.key])
        elif s.default is None:
            if not require:
                continue
            raise ConfigError(f"{s.key} is required (the layout store)")
        else:
            out[s.attr] = s.default_for(role)
    return out


def setting_field(attr: str, role: Role | None = None) -> Any:
    """A dataclass field for the setting ``attr``: ``role``'s default (none when
    required) and, as metadata, its :class:`Setting`.

    Raises:
        KeyError: No such setting.
    """
    setting = _BY_ATTR[attr]
    meta = {"setting": setting}
    if setting.default is None:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=setting.default_for(role), metadata=meta)


def settings_view(role: Role) -> Callable[[_View], _View]:
    """Class decorator: check that a settings dataclass holds exactly ``role``'s settings.

    Every field must come from :func:`setting_field`, and every setting ``role`` reads
    must be a field, so a view can never drift from the table (the check runs when the
    module is imported).

    Raises:
        TypeError: The view lacks a setting, has a field the table does not give it, or
            a field with a default other than the table's.
    """

    def check(cls: _View) -> _View:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        wanted = {s.attr for s in SETTINGS if s.role & role}
        if set(fields) != wanted:
            raise TypeError(
                f"{cls.__name__}: fields {sorted(set(fields) ^ wanted)} differ from the "
                f"settings table for {role}"
            )
        for name, f in fields.items():
            if f.metadata.get("setting") is not _BY_ATTR[name]:
                raise TypeError(f"{cls.__name__}.{name}: declare it with setting_field()")
        return cls

    return check


# --- the split of a client's dict: librdkafka's keys and its ``ordered.`` view -----------

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


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkSecuritySettings:
    """The ZooKeeper authentication and TLS settings of a client's settings view.

    The base of :class:`~ordered.producer.config.ProducerSettings` and
    :class:`~ordered.consumer_config.ConsumerSettings`: its fields come from the settings
    table like theirs (keyword-only, so a view's own fields keep their positions), and
    the TLS settings are checked as a whole whenever a view is made.

    Attributes:
        zookeeper_auth: ``ordered.zookeeper.auth`` (its ``repr`` hides the password).
        zookeeper_ssl_client_enable, zookeeper_ssl_ca_location,
            zookeeper_ssl_certificate_location, zookeeper_ssl_key_location,
            zookeeper_ssl_endpoint_identification_algorithm: ZooKeeper over TLS
            (``ordered.zookeeper.ssl.*``; together: :attr:`zookeeper_tls`).
    """

    zookeeper_auth: ZkAuth = setting_field("zookeeper_auth")
    zookeeper_ssl_client_enable: bool = setting_field("zookeeper_ssl_client_enable")
    zookeeper_ssl_ca_location: str = setting_field("zookeeper_ssl_ca_location")
    zookeeper_ssl_certificate_location: str = setting_field("zookeeper_ssl_certificate_location")
    zookeeper_ssl_key_location: str = setting_field("zookeeper_ssl_key_location")
    zookeeper_ssl_endpoint_identification_algorithm: str = setting_field(
        "zookeeper_ssl_endpoint_identification_algorithm"
    )

    def __post_init__(self) -> None:
        # The TLS settings as a whole, however the view is made: refused at the door.
        zk_tls.ZkTls.from_parsed(self)

    @property
    def zookeeper_tls(self) -> zk_tls.ZkTls:
        """The ``ordered.zookeeper.ssl.*`` settings together (checked as a whole)."""
        return zk_tls.ZkTls.from_parsed(self)
