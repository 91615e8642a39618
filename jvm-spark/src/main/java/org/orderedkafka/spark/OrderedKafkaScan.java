package org.orderedkafka.spark;

import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark's Kafka scan with a gated micro-batch stream. A batch read ({@code spark.read}) is
 * Spark's own: one batch has no gates (use the stream for per-key order).
 */
final class OrderedKafkaScan implements Scan {
  private final Scan kafka;
  private final CaseInsensitiveStringMap options;

  OrderedKafkaScan(Scan kafka, CaseInsensitiveStringMap options) {
    this.kafka = kafka;
    this.options = options;
  }

  @Override
  public StructType readSchema() {
    return kafka.readSchema();
  }

  @Override
  public String description() {
    return "ordered-kafka (gated) " + kafka.description();
  }

  @Override
  public Batch toBatch() {
    return kafka.toBatch();
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    return new OrderedMicroBatchStream(kafka.toMicroBatchStream(checkpointLocation), options);
  }

  @Override
  public CustomMetric[] supportedCustomMetrics() {
    return kafka.supportedCustomMetrics();
  }

  @Override
  public CustomTaskMetric[] reportDriverMetrics() {
    return kafka.reportDriverMetrics();
  }

  @Override
  public ColumnarSupportMode columnarSupportMode() {
    return kafka.columnarSupportMode();
  }
}
