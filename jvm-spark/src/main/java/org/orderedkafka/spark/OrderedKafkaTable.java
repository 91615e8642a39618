package org.orderedkafka.spark;

import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark's Kafka table, read only: batch reads as Spark's, micro-batches gated. The table's
 * properties (a catalog table's {@code OPTIONS}: {@code CREATE TABLE t USING ordered-kafka-jvm
 * OPTIONS (...)}) are the defaults of every read's options, which Spark's own Kafka table
 * ignores: so a SQL {@code SELECT ... FROM STREAM t} (Spark 4) reads with them.
 */
final class OrderedKafkaTable implements SupportsRead {
  private final Table kafka;
  private final Map<String, String> properties;

  OrderedKafkaTable(Table kafka, Map<String, String> properties) {
    this.kafka = kafka;
    this.properties = properties == null ? Map.of() : properties;
  }

  @Override
  public String name() {
    return "OrderedKafkaTable";
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return kafka.schema();
  }

  @Override
  public Set<TableCapability> capabilities() {
    // No continuous processing (it has no batches to gate) and no writes here: write with
    // format("kafka") and the plugins of ordered-kafka-jvm.jar (docs/jvm.md).
    Set<TableCapability> out = EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ);
    out.retainAll(kafka.capabilities());
    return out;
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    CaseInsensitiveStringMap merged = withProperties(options);
    ScanBuilder builder = ((SupportsRead) kafka).newScanBuilder(merged);
    return () -> new OrderedKafkaScan(builder.build(), merged);
  }

  /** The read's options over the table's properties (a read's option wins). */
  private CaseInsensitiveStringMap withProperties(CaseInsensitiveStringMap options) {
    if (properties.isEmpty()) {
      return options;
    }
    Map<String, String> merged = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    merged.putAll(properties);
    merged.putAll(options.asCaseSensitiveMap());
    return new CaseInsensitiveStringMap(new HashMap<>(merged));
  }
}
