"""Kafka admin calls go through the one helper, ``coordinator/kernel/kafka_admin.py``.

Its ``KafkaAdmin`` bounds every call by one timeout, turns Kafka's errors into the
layer's and asks again under the one retry policy. A tool that makes its own
confluent-kafka ``AdminClient`` gets none of that (a raw future's ``result`` timing out
with a bare ``TimeoutError``, say), so no product module other than the helper makes
one. Tests that mean to talk to Kafka without the layer (``tests/``) are not product code.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HELPER = "coordinator/kernel/kafka_admin.py"

PRODUCT = ("coordinator", "ordered", "spark_source", "linear_hash", "benchmarks", "scripts")
"""The folders of product code: the library, the service, the tools and the benchmarks."""

# A call of the class (``AdminClient(...)``), or an import of it, under any name, on one
# line or in parentheses.
_MAKES = re.compile(
    r"\bAdminClient\s*\("
    r"|^\s*from\s+confluent_kafka(\.\w+)*\s+import\s*(\([^)]*|[^#\n]*)\bAdminClient\b",
    re.M,
)


def admin_client_makers(root: Path) -> list[str]:
    """The Python files below ``root``'s product folders that import or call ``AdminClient``."""
    found = []
    for folder in PRODUCT:
        for path in sorted((root / folder).rglob("*.py")):
            if _MAKES.search(path.read_text(encoding="utf-8")):
                found.append(str(path.relative_to(root)))
    return found


def test_only_the_admin_helper_makes_an_admin_client() -> None:
    others = [p for p in admin_client_makers(ROOT) if p != HELPER]
    assert others == [], (
        f"these modules make their own AdminClient; call {HELPER}'s KafkaAdmin instead "
        "(add the call there if it is missing):\n" + "\n".join(others)
    )


def test_the_scan_finds_every_way_of_making_one(tmp_path: Path) -> None:
    assert HELPER in admin_client_makers(ROOT)
    files = {
        "ordered/imported.py": (
            "from confluent_kafka.admin import (\n    NewTopic,\n    AdminClient,\n)\n"
        ),
        "benchmarks/aliased.py": "from confluent_kafka.admin import AdminClient as Raw\n",
        "scripts/called.py": "import confluent_kafka.admin as ka\nka.AdminClient({})\n",
        "ordered/named.py": '"""An AdminClient call."""\nfrom confluent_kafka import Consumer\n',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert admin_client_makers(tmp_path) == [
        "ordered/imported.py",
        "benchmarks/aliased.py",
        "scripts/called.py",
    ]
