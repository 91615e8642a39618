package org.orderedkafka;

import java.util.Map;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Headers;

/**
 * The half of the ordered producer plugins that sees every record go out and come back:
 * {@link #onSend} counts a record of its topic as in flight (before it is partitioned), and
 * {@link #onAcknowledgement} counts it done, success or failure (kafka-clients calls it
 * for every record that passed {@code onSend}: delivered, failed by the broker, expired,
 * or refused inside {@code send()}). The barrier's drain ({@link TopicState}) is judged by
 * those counts. Acks of one partition come in send order on the producer's I/O thread, so
 * nothing here blocks or talks to ZooKeeper: a drained switch's ack is handed to the
 * session's worker.
 *
 * <p>It changes no record. Use it with {@link OrderedPartitioner} (see there); configured
 * alone, {@code configure()} fails. If another interceptor changes a record's topic, list
 * this one after it: the count is kept per topic, as {@code onSend} sees it.
 *
 * <p>kafka-clients 4.1+ calls the overload with the record's headers; 3.x calls the one
 * without. Both count the same (pause mode needs no per-record matching).
 */
public class OrderedProducerInterceptor<K, V> implements ProducerInterceptor<K, V> {
  private ProducerState state;

  @Override
  public void configure(Map<String, ?> configs) {
    state = ProducerState.pair(configs, OrderedSettings.INTERCEPTOR);
  }

  @Override
  public ProducerRecord<K, V> onSend(ProducerRecord<K, V> record) {
    state.onSend(record.topic());
    return record;
  }

  @Override
  public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
    if (metadata != null) {
      state.onAck(metadata.topic(), metadata.partition(), metadata.hasOffset() ? metadata.offset() : -1, exception);
    }
  }

  /** kafka-clients 4.1+: the same, with the record's headers (not needed in pause mode). */
  @Override
  public void onAcknowledgement(RecordMetadata metadata, Exception exception, Headers headers) {
    onAcknowledgement(metadata, exception);
  }

  @Override
  public void close() {
    if (state != null) {
      state.close();
    }
  }

  ProducerState state() {
    return state;
  }
}
