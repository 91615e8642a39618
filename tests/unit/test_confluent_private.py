"""confluent-kafka's private parts are where ordered-kafka uses them, and used in one place.

``coordinator/kernel/confluent_private.py`` is the one module that reaches into
confluent-kafka's private modules and the C layout of its ``Message``. After a
confluent-kafka upgrade these tests say what moved, instead of an ``ImportError`` or a
silently slower consumer somewhere else.
"""

from __future__ import annotations

import importlib
import inspect
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from coordinator.kernel import confluent_private
from ordered.compiled import compiled_consume_module

ROOT = Path(__file__).resolve().parents[2]
_CONFLUENT = f"confluent-kafka {version('confluent-kafka')}"

# How the serde wrappers call the serde builder (positionally, in this order).
_CALLED_AS = {
    "pop_serde_props": ("conf", "key_prop", "value_prop"),
    "build_serdes": ("specs", "conf"),
    "close_serdes": ("serdes",),
    "propagate_cluster_id_resolver": ("resolver", "serdes"),
    "SharedClusterIdResolver": ("cluster_id", "timeout"),
}

_PRIVATE_IMPORT = re.compile(
    r"^\s*(from\s+confluent_kafka(\.\w+)*\.(_\w+|cimpl)\b|import\s+confluent_kafka(\.\w+)*\._)",
    re.M,
)


def moved(parts: tuple[tuple[str, str, str], ...]) -> list[str]:
    """What of ``parts`` (module, name, use) the installed confluent-kafka lacks."""
    out = []
    for module_name, name, use in parts:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            out.append(f"{module_name} is gone (its {name} serves {use})")
            continue
        if not hasattr(module, name):
            out.append(f"{module_name}.{name} is gone (it serves {use})")
    return out


def test_every_private_part_is_there() -> None:
    gone = moved(confluent_private.PRIVATE_PARTS)
    assert gone == [], (
        f"{_CONFLUENT} moved private parts ordered-kafka uses; update "
        "coordinator/kernel/confluent_private.py:\n" + "\n".join(gone)
    )


def test_a_moved_part_is_named() -> None:
    parts = (
        ("confluent_kafka.admin._listoffsets", "OffsetSpecV9", "ListOffsets"),
        ("confluent_kafka._gone", "build_serdes", "the serde wrappers"),
    )
    assert moved(parts) == [
        "confluent_kafka.admin._listoffsets.OffsetSpecV9 is gone (it serves ListOffsets)",
        "confluent_kafka._gone is gone (its build_serdes serves the serde wrappers)",
    ]


def test_the_serde_builder_takes_what_the_wrappers_pass() -> None:
    changed = []
    for name, expected in _CALLED_AS.items():
        params = tuple(inspect.signature(getattr(confluent_private, name)).parameters)
        if params != expected:
            changed.append(f"{name} takes {params}, ordered/serde_setup.py passes {expected}")
    assert changed == [], f"{_CONFLUENT} changed its serde builder:\n" + "\n".join(changed)


def test_offset_specs_are_made_as_the_admin_helper_makes_them() -> None:
    spec = confluent_private.OffsetSpec
    missing = [m for m in ("latest", "earliest", "for_timestamp") if not hasattr(spec, m)]
    assert missing == [], f"{_CONFLUENT}'s OffsetSpec lacks {missing}"


def test_the_compiled_scan_reads_this_message_layout() -> None:
    module = compiled_consume_module()
    if module is None:
        pytest.skip("ordered._fastconsume is not built")
    assert confluent_private.bind_message_layout(module), (
        f"{_CONFLUENT}'s Message no longer starts as MessageHead in ordered/_fastconsume.c "
        "says: the consumer falls back to its pure-Python scan until the struct is updated"
    )


def test_a_wrong_layout_is_refused() -> None:
    module = compiled_consume_module()
    if module is None:
        pytest.skip("ordered._fastconsume is not built")
    try:
        # A probe whose fields do not read back as given: an int is no Message.
        assert module.bind(42, 4242, 1_234_567_890_123, b"probe") is False
    finally:
        confluent_private.bind_message_layout(module)  # bound again for later tests


def test_only_confluent_private_imports_private_modules() -> None:
    importers = []
    for package in ("coordinator", "ordered", "spark_source", "linear_hash"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if _PRIVATE_IMPORT.search(path.read_text(encoding="utf-8")):
                importers.append(str(path.relative_to(ROOT)))
    assert importers == ["coordinator/kernel/confluent_private.py"]
