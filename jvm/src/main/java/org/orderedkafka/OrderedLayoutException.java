package org.orderedkafka;

import org.apache.kafka.common.errors.ApiException;

/**
 * A record cannot be routed, and retrying will not help: the topic's layout fails its
 * check, was adopted for another incarnation of the topic (another topic id), or ZooKeeper
 * refused this producer's registration. Like every {@code ApiException} thrown from
 * {@code partition()}, {@code send()} fails the record's future and callback with it.
 */
public class OrderedLayoutException extends ApiException {
  private static final long serialVersionUID = 1L;

  public OrderedLayoutException(String message) {
    super(message);
  }

  public OrderedLayoutException(String message, Throwable cause) {
    super(message, cause);
  }

  /** The layout was adopted for another topic id (Python's {@code TopicIdMismatchError}). */
  static OrderedLayoutException topicIdMismatch(String topic, String recorded, String kafka) {
    return new OrderedLayoutException(
        "topic " + topic + " was adopted as topic id " + recorded + ", but Kafka's topic " + topic
            + " now has topic id " + kafka + " (deleted and created again?): its layout does not apply;"
            + " re-adopt it with `ordered adopt " + topic + " --replace` or remove the layout with"
            + " `ordered unadopt " + topic + "`");
  }
}
