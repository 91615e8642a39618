"""The pytest plugin of ``scripts/confluent_suite.py``'s wrapped runs.

Loaded by each wrapped pytest process (``-p confluent_suite_plugin``, with
``ORDERED_SUITE_MODE`` set): loading it substitutes the ordered classes for confluent's,
before pytest loads the tests' conftest files and any test module imports them. In the
``adopted`` mode it also adopts every topic the tests' cluster fixture creates.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

__all__ = ["ADOPTED_ENV", "MODE_ENV", "ROOT_ENV", "ZK_ENV", "pytest_collection_finish"]

MODE_ENV = "ORDERED_SUITE_MODE"
ADOPTED_ENV = "ORDERED_SUITE_ADOPTED"
"""A file the plugin appends each topic it adopted to (``topic partitions``)."""
ZK_ENV = "ORDERED_SUITE_ZOOKEEPER"
ROOT_ENV = "ORDERED_SUITE_ROOT"


def pytest_collection_finish(session: Any) -> None:
    """In ``adopted`` mode, adopt every topic the cluster fixture creates."""
    if os.environ.get(MODE_ENV) != "adopted":
        return
    fixture = sys.modules.get("tests.integration.cluster_fixture")
    if fixture is None:
        return
    cls = fixture.KafkaClusterFixture
    original = cls.create_topic

    def create_topic(self: Any, prefix: str, conf: Any = None, **kwargs: Any) -> str:
        name: str = original(self, prefix, conf, **kwargs)
        _adopt(name)
        return name

    cls.create_topic = create_topic


_controller: Any = None


def _adopt(topic: str) -> None:
    global _controller
    from coordinator.control.controller import Controller
    from coordinator.kernel.kafka_admin import KafkaAdmin
    from coordinator.kernel.store import LayoutStore
    from coordinator.kernel.zk import make_client, start_client

    if _controller is None:
        client = start_client(make_client(os.environ[ZK_ENV]), 15.0)
        store = LayoutStore(client, os.environ[ROOT_ENV])
        _controller = Controller(store, KafkaAdmin(os.environ["BROKERS"], timeout=10.0))
    record = _controller.adopt(topic)
    log = os.environ.get(ADOPTED_ENV)
    if log:
        with open(log, "a") as out:
            out.write(f"{topic} {record.active}\n")


def _with(extra: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Add ``extra`` to a client's configuration, given as confluent takes it."""
    if args and isinstance(args[0], dict):
        return ({**args[0], **extra}, *args[1:]), kwargs
    if not args and kwargs:
        return args, {**kwargs, **extra}
    return args, kwargs  # no configuration: the wrapper's own error, as an app gets it


def _substitute(extra: dict[str, Any]) -> None:
    import confluent_kafka

    import ordered.consumer
    import ordered.deserializing
    import ordered.producer
    import ordered.serializing

    # The wrappers' own modules keep confluent's classes: every module of the project
    # that holds the ``confluent_kafka`` module gets a copy with the originals.
    originals = types.ModuleType("confluent_kafka")
    originals.__dict__.update(vars(confluent_kafka))
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in ("ordered", "coordinator", "linear_hash"):
            continue
        for attr, value in list(vars(module).items()):
            if value is confluent_kafka:
                setattr(module, attr, originals)

    class Producer(ordered.producer.OrderedProducer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            a, k = _with(extra, args, kwargs)
            super().__init__(*a, **k)

    class Consumer(ordered.consumer.OrderedConsumer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            a, k = _with(extra, args, kwargs)
            super().__init__(*a, **k)

    class SerializingProducer(ordered.serializing.OrderedSerializingProducer):  # type: ignore[type-arg]
        def __init__(self, conf: Any) -> None:
            super().__init__({**conf, **extra} if isinstance(conf, dict) else conf)

    class DeserializingConsumer(ordered.deserializing.OrderedDeserializingConsumer):  # type: ignore[type-arg]
        def __init__(self, conf: Any) -> None:
            super().__init__({**conf, **extra} if isinstance(conf, dict) else conf)

    for cls in (Producer, Consumer, SerializingProducer, DeserializingConsumer):
        setattr(confluent_kafka, cls.__name__, cls)
    _substitute_aio(extra)


def _substitute_aio(extra: dict[str, Any]) -> None:
    """confluent's four asyncio classes replaced by the ordered ones, in every module of
    ``confluent_kafka.aio`` that names them (confluent's tests import them from
    ``confluent_kafka.aio._AIOConsumer`` and ``confluent_kafka.aio.producer._AIOProducer``)."""
    import confluent_kafka.aio

    import ordered.aio

    # The sync client is made as confluent's asyncio classes make theirs, through
    # ``confluent_kafka.Producer``/``Consumer`` looked up when it is made: the ordered
    # classes (substituted above), or the mock a test of confluent's puts there.
    class AIOProducer(ordered.aio.OrderedAIOProducer):
        def __init__(self, producer_conf: Any, *args: Any, **kwargs: Any) -> None:
            conf = {**producer_conf, **extra} if isinstance(producer_conf, dict) else producer_conf
            super().__init__(conf, *args, **kwargs)

        def _sync_client(self, conf: dict[str, Any]) -> Any:
            return confluent_kafka.Producer(conf)

    class AIOConsumer(ordered.aio.OrderedAIOConsumer):
        def __init__(self, consumer_conf: Any, *args: Any, **kwargs: Any) -> None:
            conf = {**consumer_conf, **extra} if isinstance(consumer_conf, dict) else consumer_conf
            super().__init__(conf, *args, **kwargs)

        def _sync_client(self, conf: dict[str, Any]) -> Any:
            return confluent_kafka.Consumer(conf)

    class AsyncSerializingProducer(ordered.aio.OrderedAsyncSerializingProducer):  # type: ignore[type-arg]
        async def __init__(self, conf: Any, **kwargs: Any) -> None:  # type: ignore[misc]
            await super().__init__({**conf, **extra} if isinstance(conf, dict) else conf, **kwargs)

    class AsyncDeserializingConsumer(ordered.aio.OrderedAsyncDeserializingConsumer):  # type: ignore[type-arg]
        async def __init__(self, conf: Any, **kwargs: Any) -> None:  # type: ignore[misc]
            await super().__init__({**conf, **extra} if isinstance(conf, dict) else conf, **kwargs)

    wrapped = (AIOProducer, AIOConsumer, AsyncSerializingProducer, AsyncDeserializingConsumer)
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("confluent_kafka.aio"):
            continue
        for cls in wrapped:
            if cls.__name__ in vars(module):
                setattr(module, cls.__name__, cls)
    assert confluent_kafka.aio.AIOProducer is AIOProducer


if os.environ.get(MODE_ENV) in ("plain", "adopted"):
    # Substitute now, before pytest loads the tests' conftest files, which import
    # confluent's classes.
    _substitute(
        {
            "ordered.zookeeper.connect": os.environ[ZK_ENV],
            "ordered.zookeeper.root": os.environ[ROOT_ENV],
        }
    )
