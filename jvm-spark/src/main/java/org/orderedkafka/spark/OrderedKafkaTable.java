package org.orderedkafka.spark;

import java.util.EnumSet;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** Spark's Kafka table, read only: batch reads as Spark's, micro-batches gated. */
final class OrderedKafkaTable implements SupportsRead {
  private final Table kafka;

  OrderedKafkaTable(Table kafka) {
    this.kafka = kafka;
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
    ScanBuilder builder = ((SupportsRead) kafka).newScanBuilder(options);
    return () -> new OrderedKafkaScan(builder.build(), options);
  }
}
