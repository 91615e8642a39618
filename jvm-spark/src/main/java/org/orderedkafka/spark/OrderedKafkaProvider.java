package org.orderedkafka.spark;

import java.util.HashMap;
import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.kafka010.KafkaSourceProvider;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.orderedkafka.OrderedSettings;

/**
 * The JVM Spark source of ordered-kafka ({@code format("ordered-kafka-jvm")} or this class's
 * name): Spark's own Kafka source (same options, schema, offsets and executors' reader) whose
 * micro-batches end at the gates of adopted topics ({@link OrderedMicroBatchStream}). Within a
 * micro-batch every key's records come from one partition; across micro-batches a key's older
 * records always come in an earlier batch.
 *
 * <p>Options are Spark's Kafka source options plus {@code ordered.zookeeper.connect} (and the
 * other {@code ordered.zookeeper.*} settings of the clients). Without it, or on a topic that is
 * not adopted, the source reads exactly as {@code format("kafka")}.
 */
public final class OrderedKafkaProvider implements TableProvider, DataSourceRegister {
  /** The short format name. */
  public static final String SHORT_NAME = "ordered-kafka-jvm";

  private final KafkaSourceProvider kafka = new KafkaSourceProvider();

  @Override
  public String shortName() {
    return SHORT_NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    checkOrderedOptions(options);
    return kafka.inferSchema(options);
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new OrderedKafkaTable(kafka.getTable(schema, partitioning, properties), properties);
  }

  /**
   * The {@code ordered.*} options, checked by the clients' settings table (an unknown or
   * malformed one fails at {@code load()}, naming it); null when none is given.
   */
  static Map<String, String> checkOrderedOptions(Map<String, String> options) {
    Map<String, String> ordered = new HashMap<>();
    for (Map.Entry<String, String> e : options.entrySet()) {
      String key = e.getKey().toLowerCase(java.util.Locale.ROOT);
      if (key.startsWith("ordered.")) {
        ordered.put(key, e.getValue());
      }
    }
    if (ordered.isEmpty()) {
      return null;
    }
    OrderedSettings.parse(ordered, OrderedKafkaProvider.class.getName());
    return ordered;
  }
}
