package org.orderedkafka;

import org.apache.kafka.common.errors.RetriableException;

/**
 * A keyed record to an ordered topic cannot be routed now: the ZooKeeper session is
 * suspended or lost (the layout may be stale), or the layout could not be read.
 *
 * <p>Thrown from {@code OrderedPartitioner.partition()}. It is a Kafka
 * {@link RetriableException} (an {@code ApiException}), so {@code KafkaProducer.send()}
 * (kafka-clients 3.9 and 4.x alike) appends nothing, returns a failed future, and passes
 * it to the record's callback and to the interceptors: the send fails visibly, and a
 * retry after the session is back routes by the current layout.
 */
public class LayoutUnavailableException extends RetriableException {
  private static final long serialVersionUID = 1L;

  public LayoutUnavailableException(String message) {
    super(message);
  }

  public LayoutUnavailableException(String message, Throwable cause) {
    super(message, cause);
  }
}
