package org.orderedkafka.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.Supplier;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.kafka010.KafkaMicroBatchStream;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.orderedkafka.Json;
import org.orderedkafka.LayoutHistories;
import org.orderedkafka.gate.EpochInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Spark's Kafka micro-batch stream, each batch's end capped at the gates.
 *
 * <p>At every trigger, on the driver ({@link TriggerPlanner} decides which reads it makes):
 *
 * <ol>
 *   <li>Kafka's end offsets, FIRST, through Spark's own reader ({@code latestOffset} of the
 *       wrapped stream with no read limit);
 *   <li>then each topic's layout history after a ZooKeeper {@code sync}
 *       ({@link LayoutHistories}): every record below an end offset read in step 1 was written
 *       before the layout was read, so every epoch it carries is known ("no record outruns its
 *       epoch");
 *   <li>each partition of an adopted topic capped at its first closed gate ({@link
 *       org.orderedkafka.gate.GatePlanner#gateCaps}: the gate rule of {@link
 *       org.orderedkafka.gate.GateEvaluator}, with the batch's start, the end of the last
 *       logged batch, as the group's progress), with Kafka's log start offsets (trimmed
 *       records count as passed) read only when a partition is held without them;
 *   <li>then {@code maxOffsetsPerTrigger} (split over the backlog below the caps, as Spark
 *       splits it) or {@code minOffsetsPerTrigger}/{@code maxTriggerDelay}.
 * </ol>
 *
 * <p>Under {@code Trigger.AvailableNow}, once every partition has reached the run's target,
 * a trigger reads nothing and answers that the run is over, as Spark's own source does.
 * The ZooKeeper session is opened when the stream is made and closed in the background
 * when it stops.
 *
 * <p>Everything else is the wrapped stream's: initial offsets (and their checkpoint file),
 * offsets' JSON, planning the tasks (with Spark's {@code failOnDataLoss} checks), the
 * executors' reader and the metrics. A topic that is not adopted, or a query without {@code
 * ordered.zookeeper.connect}, is read exactly as Spark's Kafka source reads it.
 */
final class OrderedMicroBatchStream
    implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
  private static final Logger LOG = LoggerFactory.getLogger(OrderedMicroBatchStream.class);

  private final KafkaMicroBatchStream kafka;
  private final TriggerPlanner planner;
  /**
   * The layouts' reader, its ZooKeeper session opened in the background from the stream's
   * creation on, so that the opening overlaps Spark's start of the query (the initial
   * offsets, the checkpoint's files) instead of adding to the first trigger; null when the
   * query is not gated.
   */
  private CompletableFuture<LayoutHistories> layouts;

  private long lastTriggerMillis;
  private long heldRecords;
  private int heldPartitions;
  private String lastLogged;

  OrderedMicroBatchStream(MicroBatchStream kafka, CaseInsensitiveStringMap options) {
    if (!(kafka instanceof KafkaMicroBatchStream)) {
      throw new IllegalStateException(
          "expected Spark's KafkaMicroBatchStream, got " + kafka.getClass().getName());
    }
    this.kafka = (KafkaMicroBatchStream) kafka;
    Map<String, String> checked = OrderedKafkaProvider.checkOrderedOptions(options);
    Map<String, String> ordered =
        checked != null && checked.containsKey("ordered.zookeeper.connect") ? checked : null;
    this.planner = new TriggerPlanner(ordered != null);
    this.layouts =
        ordered == null ? null : inBackground("open", () -> new LayoutHistories(ordered));
  }

  /** {@code work} on a thread of its own ({@code ordered-zookeeper-<what>}). */
  private static <T> CompletableFuture<T> inBackground(String what, Supplier<T> work) {
    CompletableFuture<T> out = new CompletableFuture<>();
    Thread thread =
        new Thread(
            () -> {
              try {
                out.complete(work.get());
              } catch (Throwable e) {
                out.completeExceptionally(e);
              }
            },
            "ordered-zookeeper-" + what);
    thread.start();
    return out;
  }

  // --- the wrapped stream ---------------------------------------------------------------

  @Override
  public Offset initialOffset() {
    return kafka.initialOffset();
  }

  @Override
  public Offset deserializeOffset(String json) {
    return kafka.deserializeOffset(json);
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    return kafka.planInputPartitions(start, end);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return kafka.createReaderFactory();
  }

  @Override
  public void commit(Offset end) {
    kafka.commit(end);
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return kafka.getDefaultReadLimit();
  }

  @Override
  public Offset reportLatestOffset() {
    return kafka.reportLatestOffset();
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException(
        "latestOffset(Offset, ReadLimit) should be called instead of this method");
  }

  @Override
  public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
    Map<String, String> out = new HashMap<>(kafka.metrics(latestConsumedOffset));
    out.put("recordsHeldAtGates", Long.toString(heldRecords));
    out.put("partitionsHeldAtGates", Integer.toString(heldPartitions));
    return out;
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    // Not passed on: the wrapped stream must keep reading Kafka's current end offsets, so
    // that a target below a gate's source boundary can be raised (availableNowTarget).
    planner.prepareForTriggerAvailableNow();
  }

  @Override
  public void stop() {
    try {
      kafka.stop();
    } finally {
      if (layouts != null) {
        CompletableFuture<LayoutHistories> opened = layouts;
        layouts = null;
        // Closed in the background: ZooKeeper's close of a session (measured at about 0.1 s
        // here, a write on the server) would otherwise add to every query's end. The thread
        // is not a daemon, so a JVM that ends normally still closes the session.
        inBackground(
            "close",
            () -> {
              try {
                opened.join().close();
              } catch (RuntimeException e) {
                // Never opened: nothing to close (its error was the first trigger's).
              }
              return null;
            });
      }
    }
  }

  @Override
  public String toString() {
    return "OrderedMicroBatchStream[" + kafka + "]";
  }

  // --- the gates ------------------------------------------------------------------------

  @Override
  public Offset latestOffset(Offset startOffset, ReadLimit limit) {
    Map<TopicPartition, Long> begin = offsets(startOffset);
    TriggerPlanner.Plan plan =
        planner.plan(
            begin,
            new TriggerPlanner.Reads() {
              @Override
              public Map<TopicPartition, Long> ends() {
                // Spark's reader, with no limit: the caps come before it.
                return offsets(kafka.latestOffset(startOffset, ReadLimit.allAvailable()));
              }

              @Override
              public List<EpochInfo> epochs(String topic) {
                LayoutHistories.History history = layouts().read(topic);
                return history.adopted ? history.epochs : null;
              }

              @Override
              public Map<TopicPartition, Long> logStarts() {
                return earliest();
              }
            });
    heldRecords = plan.heldRecords;
    heldPartitions = plan.heldPartitions;
    if (plan.fromTarget) {
      return startOffset;
    }
    // The read limit, below the caps.
    Map<TopicPartition, Long> end = limit(limit, begin, plan.capped, plan.logStarts);
    if (end == null) {
      return startOffset;
    }
    String json = json(end);
    if (plan.heldRecords > 0 && !json.equals(lastLogged)) {
      lastLogged = json;
      LOG.info(
          "ordered-kafka: batch ends at {} ({} records of {} partitions held at gates)",
          json, plan.heldRecords, plan.heldPartitions);
    }
    return kafka.deserializeOffset(json);
  }

  /** The layouts' reader, once its ZooKeeper session (opened with the stream) is up. */
  private LayoutHistories layouts() {
    try {
      return layouts.join();
    } catch (CompletionException e) {
      // The opening's own error (ZooKeeper unreachable ...), as when it was opened here.
      if (e.getCause() instanceof RuntimeException) {
        throw (RuntimeException) e.getCause();
      }
      throw e;
    }
  }

  /**
   * The read limit applied to the capped ends; null to skip this trigger (minOffsetsPerTrigger
   * not reached within maxTriggerDelay).
   */
  private Map<TopicPartition, Long> limit(
      ReadLimit limit,
      Map<TopicPartition, Long> begin,
      Map<TopicPartition, Long> capped,
      Map<TopicPartition, Long> logStarts) {
    List<ReadLimit> limits = new ArrayList<>();
    if (limit instanceof CompositeReadLimit) {
      limits.addAll(List.of(((CompositeReadLimit) limit).getReadLimits()));
    } else {
      limits.add(limit);
    }
    ReadMinRows min = null;
    ReadMaxRows max = null;
    for (ReadLimit l : limits) {
      if (l instanceof ReadAllAvailable) {
        return capped;
      } else if (l instanceof ReadMinRows) {
        min = (ReadMinRows) l;
      } else if (l instanceof ReadMaxRows) {
        max = (ReadMaxRows) l;
      }
    }
    if (min != null && !planner.availableNow() && delayBatch(min, begin, capped)) {
      return null;
    }
    if (max != null) {
      Map<TopicPartition, Long> starts = logStarts;
      if (!begin.keySet().containsAll(capped.keySet())
          && !logStarts.keySet().containsAll(capped.keySet())) {
        // A partition new to the query starts at its log start, as Spark's split has it.
        starts = earliest();
      }
      return rateLimit(max.maxRows(), begin, capped, starts);
    }
    return capped;
  }

  /** Kafka's log start offsets of the query's partitions (Spark's offset reader). */
  private Map<TopicPartition, Long> earliest() {
    Map<TopicPartition, Long> out = new HashMap<>();
    scala.collection.immutable.Map<TopicPartition, Object> earliest =
        kafka.kafkaOffsetReader().fetchEarliestOffsets();
    // Iterated as pairs: the same source on Scala 2.12 (Spark 3.5) and 2.13 (Spark 4).
    scala.collection.Iterator<scala.Tuple2<TopicPartition, Object>> pairs = earliest.iterator();
    while (pairs.hasNext()) {
      scala.Tuple2<TopicPartition, Object> e = pairs.next();
      out.put(e._1(), ((Number) e._2()).longValue());
    }
    return out;
  }

  private boolean delayBatch(
      ReadMinRows min, Map<TopicPartition, Long> begin, Map<TopicPartition, Long> capped) {
    long now = System.currentTimeMillis();
    if (now - lastTriggerMillis >= min.maxTriggerDelayMs()) {
      lastTriggerMillis = now;
      return false;
    }
    long fresh = 0;
    for (Map.Entry<TopicPartition, Long> e : capped.entrySet()) {
      fresh += e.getValue() - begin.getOrDefault(e.getKey(), 0L);
    }
    if (fresh < min.minRows()) {
      return true;
    }
    lastTriggerMillis = now;
    return false;
  }

  /**
   * Spark's {@code maxOffsetsPerTrigger} split, over the backlog below the caps: in proportion
   * to each partition's backlog, rounded down, or up to 1 below 1 (no partition starves);
   * never past the cap. A partition new to the query starts at its log start.
   */
  static Map<TopicPartition, Long> rateLimit(
      long limit,
      Map<TopicPartition, Long> begin,
      Map<TopicPartition, Long> capped,
      Map<TopicPartition, Long> logStarts) {
    Map<TopicPartition, Long> sizes = new HashMap<>();
    double total = 0;
    for (Map.Entry<TopicPartition, Long> e : capped.entrySet()) {
      long first = begin.getOrDefault(e.getKey(), logStarts.getOrDefault(e.getKey(), 0L));
      long size = e.getValue() - first;
      if (size > 0) {
        sizes.put(e.getKey(), size);
        total += size;
      }
    }
    if (total < 1) {
      return capped;
    }
    Map<TopicPartition, Long> out = new HashMap<>(capped);
    for (Map.Entry<TopicPartition, Long> e : sizes.entrySet()) {
      long first = begin.getOrDefault(e.getKey(), logStarts.getOrDefault(e.getKey(), 0L));
      double prorate = limit * (e.getValue() / total);
      long share = (long) (prorate < 1 ? Math.ceil(prorate) : Math.floor(prorate));
      long off = share > Long.MAX_VALUE - first ? Long.MAX_VALUE : first + share;
      out.put(e.getKey(), Math.min(capped.get(e.getKey()), off));
    }
    return out;
  }

  // --- offsets as Spark's Kafka JSON --------------------------------------------------------

  static Map<TopicPartition, Long> offsets(Offset offset) {
    Map<TopicPartition, Long> out = new HashMap<>();
    Object parsed = Json.parse(offset.json());
    for (Map.Entry<?, ?> t : ((Map<?, ?>) parsed).entrySet()) {
      String topic = (String) t.getKey();
      for (Map.Entry<?, ?> p : ((Map<?, ?>) t.getValue()).entrySet()) {
        out.put(
            new TopicPartition(topic, Integer.parseInt((String) p.getKey())),
            ((Number) p.getValue()).longValue());
      }
    }
    return out;
  }

  static String json(Map<TopicPartition, Long> offsets) {
    Map<String, Object> out = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
      @SuppressWarnings("unchecked")
      Map<String, Object> parts =
          (Map<String, Object>) out.computeIfAbsent(e.getKey().topic(), t -> new LinkedHashMap<>());
      parts.put(Integer.toString(e.getKey().partition()), e.getValue());
    }
    return Json.write(out);
  }
}
