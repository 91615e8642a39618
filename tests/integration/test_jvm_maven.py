"""The Java tests of the JVM plugins (``jvm/``), run by Maven against the session's servers.

``mvn -B -o -q -f jvm/pom.xml test`` with ``ORDERED_TEST_ZOOKEEPER_CONNECT`` and
``ORDERED_TEST_BOOTSTRAP_SERVERS`` pointing at the pytest session's ZooKeeper and Kafka:
the golden vectors, the settings checks, and a real ``KafkaProducer`` with
``OrderedPartitioner`` and ``OrderedProducerInterceptor`` (registration, routing, the
barrier's ack and pause, refusal while ZooKeeper is cut off, leaving, the shared session,
the topic-id check, the ACL of a registration). Any Java failure fails this test, and so
does an integration test that Maven skipped (the variables did not reach it).
``scripts/setup.sh`` builds the jar and fetches everything Maven needs, so this runs offline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ordered.devcluster.cluster import ClusterState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

JVM = Path(__file__).resolve().parents[2] / "jvm"
REPORTS = JVM / "target" / "surefire-reports"
INTEGRATION_SUITES = (
    "org.orderedkafka.ProducerIntegrationTest",
    "org.orderedkafka.ProducerIntegrationTest-kafka-clients-3.9",
)
"""The suites that need the servers (the second run puts kafka-clients 3.9 in place of 4.1,
as Spark 4.2's Kafka connector bundles it): each must have run, none skipped."""

CONFORMANCE_SUITES = (
    "org.orderedkafka.ConsumerConformanceTest",
    "org.orderedkafka.ConsumerConformanceTest-kafka-clients-3.9",
)
"""The consumer conformance scenarios (vectors/consumer/) on OrderedKafkaConsumer, on both
kafka-clients: each must have run, none skipped (a scenario not run is listed in the test)."""


def _suites() -> dict[str, tuple[int, int, int, int]]:
    """Report name (the suite, with the run's suffix) -> (tests, failures, errors, skipped)."""
    out: dict[str, tuple[int, int, int, int]] = {}
    for report in REPORTS.glob("TEST-*.xml"):
        root = ET.parse(report).getroot()
        tests, failures, errors, skipped = (
            int(root.get(field, "0")) for field in ("tests", "failures", "errors", "skipped")
        )
        out[report.stem.removeprefix("TEST-")] = (tests, failures, errors, skipped)
    return out


def test_java_tests_pass_against_the_session_servers(cluster: ClusterState) -> None:
    """Every Java test passes, and the integration suites ran (none skipped)."""
    mvn = shutil.which("mvn")
    assert mvn is not None, "Maven is missing: run bash scripts/setup.sh"
    shutil.rmtree(REPORTS, ignore_errors=True)
    env = {
        **os.environ,
        "ORDERED_TEST_ZOOKEEPER_CONNECT": cluster.zookeeper_connect,
        "ORDERED_TEST_BOOTSTRAP_SERVERS": cluster.bootstrap_servers,
    }
    result = subprocess.run(
        [mvn, "-B", "-o", "-q", "-f", str(JVM / "pom.xml"), "test"],
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-80:])
    assert result.returncode == 0, f"mvn test failed (exit {result.returncode}):\n{tail}"
    suites = _suites()
    for name in INTEGRATION_SUITES + CONFORMANCE_SUITES:
        assert name in suites, f"{name} did not run; suites: {sorted(suites)}"
        tests, failures, errors, skipped = suites[name]
        assert tests > 0 and failures == 0 and errors == 0, f"{name}: {suites[name]}"
        assert skipped == 0, f"{name} skipped {skipped} test(s): the variables did not reach it"
    total = sum(s[0] for s in suites.values())
    print(f"java: {total} tests in {len(suites)} suites passed")
