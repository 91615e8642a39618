"""Resolve the pinned Kafka and ZooKeeper jars (and Spark's connector, Kafka's tools) into a cache.

Each component has a small POM in ``resources/``; ``mvn dependency:copy-dependencies``
copies the artifact and its runtime dependencies into ``<cache>/<component>-<version>``.
The copy goes to a temporary directory first and is renamed into place only when Maven
succeeded, so the cache never holds half a classpath. Maven's own repository lives in
``<cache>/m2``, so a cache directory is self-contained and reused between runs.

Environment:
    ORDERED_CACHE_DIR: the cache directory (default ``~/.cache/ordered``).
    ORDERED_MAVEN_MIRROR: a repository URL used instead of Maven Central.
    ORDERED_MVN: the ``mvn`` executable (default: ``mvn`` on ``PATH``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from coordinator.kernel.errors import ClusterError

__all__ = [
    "COMPONENTS",
    "Component",
    "ResolvedJars",
    "cache_dir",
    "pinned_version",
    "resolve",
]

_MARKER = ".complete"


@dataclass(frozen=True, slots=True)
class Component:
    """A server whose jars come from Maven Central.

    Attributes:
        name: Short name used in the cache directory and messages.
        pom: File name of its POM under ``ordered/devcluster/resources``.
        version_property: The POM property that pins its version.
        artifact: ``group:artifact`` shown in messages.
    """

    name: str
    pom: str
    version_property: str
    artifact: str


COMPONENTS: dict[str, Component] = {
    "kafka": Component("kafka", "kafka-pom.xml", "kafka.version", "org.apache.kafka:kafka_2.13"),
    "zookeeper": Component(
        "zookeeper", "zookeeper-pom.xml", "zookeeper.version", "org.apache.zookeeper:zookeeper"
    ),
    # Spark's own Kafka connector, the yardstick of the Spark benchmark (not a server).
    "spark-kafka": Component(
        "spark-kafka",
        "spark-kafka-pom.xml",
        "spark-kafka.version",
        "org.apache.spark:spark-sql-kafka-0-10_2.13",
    ),
    # Spark 3.5's connector (Scala 2.12): the JVM Spark source on the Spark 3.5 line.
    "spark-kafka-3.5": Component(
        "spark-kafka-3.5",
        "spark-kafka-3.5-pom.xml",
        "spark-kafka-3.5.version",
        "org.apache.spark:spark-sql-kafka-0-10_2.12",
    ),
    # Kafka's own tools (ProducerPerformance, the console producer) and kafka-clients:
    # the JVM producers' tests and benchmark run them with the ordered jar (not a server).
    "kafka-tools": Component(
        "kafka-tools", "kafka-tools-pom.xml", "kafka-tools.version", "org.apache.kafka:kafka-tools"
    ),
    # Kafka Streams (without RocksDB's native library): the Streams test's application runs
    # with OrderedKafkaClientSupplier on it (not a server).
    "kafka-streams": Component(
        "kafka-streams",
        "kafka-streams-pom.xml",
        "kafka-streams.version",
        "org.apache.kafka:kafka-streams",
    ),
    # A Kafka Connect worker and Kafka's file connectors: the Connect test runs a standalone
    # worker with OrderedSinkConnector wrapping FileStreamSinkConnector (not a server).
    "kafka-connect": Component(
        "kafka-connect",
        "kafka-connect-pom.xml",
        "kafka-connect.version",
        "org.apache.kafka:connect-runtime",
    ),
}


@dataclass(frozen=True, slots=True)
class ResolvedJars:
    """A component's classpath in the cache.

    Attributes:
        component: The component name (a key of :data:`COMPONENTS`).
        version: The pinned version.
        directory: The directory holding every jar of the classpath.
        fetched: Whether this call downloaded them (False: found in the cache).
        seconds: Time spent resolving.
    """

    component: str
    version: str
    directory: Path
    fetched: bool
    seconds: float

    @property
    def classpath(self) -> str:
        """The JVM ``-cp`` argument for the whole directory."""
        return str(self.directory / "*")


def cache_dir() -> Path:
    """Return the cache directory (``$ORDERED_CACHE_DIR`` or ``~/.cache/ordered``)."""
    env = os.environ.get("ORDERED_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "ordered"


def _pom_text(component: Component) -> str:
    return (resources.files("ordered.devcluster") / "resources" / component.pom).read_text()


def pinned_version(name: str) -> str:
    """Return the version pinned in the POM of component ``name``.

    Raises:
        ValueError: ``name`` is not a key of :data:`COMPONENTS`.
    """
    component = _component(name)
    prop = re.escape(component.version_property)
    match = re.search(rf"<{prop}>([^<]+)</{prop}>", _pom_text(component))
    if match is None:  # pragma: no cover - the POMs ship with the package
        raise ClusterError(f"{component.pom} does not pin {component.version_property}")
    return match.group(1).strip()


def _component(name: str) -> Component:
    try:
        return COMPONENTS[name]
    except KeyError:
        raise ValueError(f"component must be one of {sorted(COMPONENTS)}, not {name!r}") from None


def _settings_xml(mirror: str) -> str:
    return (
        '<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0"><mirrors><mirror>'
        "<id>ordered-mirror</id><mirrorOf>*</mirrorOf>"
        f"<url>{mirror}</url></mirror></mirrors></settings>"
    )


def resolve(
    name: str,
    *,
    cache: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> ResolvedJars:
    """Return the cached classpath of ``name``, fetching it with Maven when missing.

    Args:
        name: ``kafka``, ``zookeeper``, ``spark-kafka``, ``spark-kafka-3.5``, ``kafka-tools``,
            ``kafka-streams`` or ``kafka-connect``.
        cache: The cache directory (default :func:`cache_dir`).
        progress: Called with a line of text for each step worth telling a user.

    Raises:
        ClusterError: the jars are not cached and Maven is missing or cannot reach a
            repository; the message names the artifact, the cause and Maven's last lines.
    """
    component = _component(name)
    version = pinned_version(name)
    root = cache or cache_dir()
    target = root / f"{component.name}-{version}"
    started = time.monotonic()
    if (target / _MARKER).is_file():
        return ResolvedJars(name, version, target, False, time.monotonic() - started)

    mvn = shutil.which(os.environ.get("ORDERED_MVN") or "mvn")
    if mvn is None:
        raise ClusterError(
            f"{component.artifact}:{version} is not in the cache ({target}) and Maven was "
            "not found: install it (apt-get install maven) or set ORDERED_MVN"
        )
    if progress:
        progress(f"fetching {component.artifact}:{version} and its dependencies with Maven")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{component.name}-", dir=root) as tmp:
        staging = Path(tmp) / "jars"
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_pom_text(component))
        cmd = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            f"-Dmaven.repo.local={root / 'm2'}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]
        mirror = os.environ.get("ORDERED_MAVEN_MIRROR")
        if mirror:
            settings = Path(tmp) / "settings.xml"
            settings.write_text(_settings_xml(mirror))
            cmd[1:1] = ["-s", str(settings)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        except subprocess.TimeoutExpired:
            raise ClusterError(
                f"Maven did not resolve {component.artifact}:{version} within 15 minutes"
            ) from None
        if done.returncode != 0 or not any(staging.glob("*.jar")):
            tail = "\n".join(
                line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line
            ).strip()
            where = mirror or "Maven Central"
            raise ClusterError(
                f"Maven could not resolve {component.artifact}:{version} from {where} "
                f"(is the registry reachable?); the cache {target} is unchanged.\n"
                + "\n".join(tail.splitlines()[:3])
            )
        (staging / _MARKER).write_text(f"{component.artifact}:{version}\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    seconds = time.monotonic() - started
    if progress:
        progress(f"fetched {component.name} {version} in {seconds:.1f} s into {target}")
    return ResolvedJars(name, version, target, True, seconds)
