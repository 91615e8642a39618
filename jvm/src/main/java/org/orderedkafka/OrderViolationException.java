package org.orderedkafka;

import org.apache.kafka.common.KafkaException;

/**
 * A fetched record does not sit where its layout put it (C-AUDIT-1): its key routes elsewhere
 * under every layout that may have placed it at its offset, or its epoch header contradicts the
 * boundaries. Thrown by {@code OrderedKafkaConsumer.poll()} under {@code
 * ordered.violation.policy=raise} (Python's {@code OrderViolationError}); the batch is taken
 * back, so the next {@code poll()} meets the record again unless the application seeks past it.
 */
public class OrderViolationException extends KafkaException {
  private static final long serialVersionUID = 1L;

  public OrderViolationException(String message) {
    super(message);
  }
}
