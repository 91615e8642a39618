"""``OrderedProducer``: a drop-in ``confluent_kafka.Producer`` that keeps per-key order.

The producer side of KIP-253 in the clients (docs/protocol.md, "The producer"), as a
package of parts composed by :class:`OrderedProducer` (``client.py``): the topic
registry (``topics.py``), the route table (``routes.py``), the switch tracker
(``tracking.py``), the session (``session.py``), the worker (``worker.py``), leaving
(``leave.py``), the configuration (``config.py``) and the choice of the send path
(``send.py``). See :mod:`ordered.producer.client` for the whole picture.
"""

from __future__ import annotations

from ordered.producer.client import PASSED_THROUGH, OrderedProducer
from ordered.producer.routes import TopicState
from ordered.producer.send import COMPILED
from ordered.producer.tracking import DeliveryCallback

__all__ = ["COMPILED", "PASSED_THROUGH", "DeliveryCallback", "OrderedProducer", "TopicState"]
