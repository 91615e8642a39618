package org.orderedkafka.tools;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.orderedkafka.OrderedKafkaConsumer;

/**
 * The verifiable reader of {@code ordered.verify}, in Java: a group member that reads a topic
 * with {@link OrderedKafkaConsumer} (or, for comparison, Kafka's {@link KafkaConsumer}) and
 * appends every record it returns to a history file in the JSON-lines format of the Python
 * {@code ordered.verify.VerifiableReader}, so that {@code ordered.verify.check} judges order,
 * loss and commits the same way for both languages. {@code ordered chaos --java-readers} runs
 * it as members of its main group; the JVM tests run it too.
 *
 * <pre>
 * java -cp "$(ordered jvm-jar):KAFKA_CLIENTS_JARS" org.orderedkafka.tools.VerifiableReader \
 *   --topic T --group G --reader-id r1 --history h.jsonl [--impl ordered|kafka]
 *   [--commit auto|sync] [--stop-file F] [--stats S.json] [--idle-exit SECONDS]
 *   [--delay-ms N] [--property k=v ...]
 * </pre>
 *
 * <p>History lines: {@code {"ev":"pass",...}} at start and at each assignment change; {@code
 * {"ev":"dlv",...}} per record returned, written (one write() per poll) before any commit of
 * it; with {@code --commit sync}, {@code {"ev":"cmt",...,"why":"commit"}} after each
 * commitSync() that succeeded; with {@code --impl ordered}, {@code {"ev":"held",...}} whenever
 * the partitions a gate holds change. Timestamps are {@code System.nanoTime()}, the same
 * CLOCK_MONOTONIC as the Python histories.
 *
 * <p>It stops (closing the consumer, so the group rebalances at once) on SIGTERM or when the
 * stop file exists; on SIGHUP it drains: it reads on and stops once nothing came for {@code
 * --idle-exit} seconds. stdout: "READY" once subscribed, "DONE" once closed. With {@code
 * --stats} it rewrites that file every second ({@code delivered}, {@code pass}).
 */
public final class VerifiableReader {
  private final String group;
  private final String reader;
  private final FileOutputStream out;
  private final StringBuilder pending = new StringBuilder();
  private int pass = 0;
  private long delivered = 0;

  private static volatile boolean stopSignalled = false;
  private static volatile long drainAt = -1;

  private VerifiableReader(String group, String reader, String history) throws IOException {
    this.group = group;
    this.reader = reader;
    this.out = new FileOutputStream(history, true);
  }

  private void event(String json) {
    pending.append(json).append('\n');
  }

  private void flush() throws IOException {
    if (pending.length() > 0) {
      out.write(pending.toString().getBytes(StandardCharsets.UTF_8));
      pending.setLength(0);
    }
  }

  private static String q(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  private void newPass(String why) {
    pass++;
    event("{\"ev\":\"pass\",\"g\":" + q(group) + ",\"r\":" + q(reader) + ",\"n\":" + pass
        + ",\"why\":" + q(why) + ",\"ts\":" + System.nanoTime() + "}");
  }

  private static void writeStats(String path, String json) throws IOException {
    Path target = Path.of(path);
    Path tmp = Path.of(path + ".tmp");
    Files.writeString(tmp, json);
    Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }

  private String stats(boolean done) {
    return "{\"delivered\":" + delivered + ",\"pass\":" + pass + ",\"java\":true"
        + (done ? ",\"done\":true" : "") + "}";
  }

  @SuppressWarnings("removal")
  private static void onSignals() {
    // sun.misc.Signal is the only way a JVM program tells SIGTERM from SIGHUP; the chaos run
    // sends them to mean "leave the group now" and "read to the end, then leave".
    try {
      sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> stopSignalled = true);
      sun.misc.Signal.handle(new sun.misc.Signal("HUP"), s -> {
        if (drainAt < 0) drainAt = System.nanoTime();
      });
    } catch (IllegalArgumentException | UnsupportedOperationException e) {
      System.err.println("signals not handled (" + e + "): only the stop file stops the reader");
    }
  }

  public static void main(String[] args) throws Exception {
    String impl = "ordered";
    String topic = null;
    String group = null;
    String readerId = null;
    String history = null;
    String commit = "auto";
    String stopFile = null;
    String statsFile = null;
    double idleExit = 20.0;
    long delayMs = 0;
    Properties props = new Properties();
    for (int i = 0; i + 1 < args.length; i += 2) {
      String value = args[i + 1];
      switch (args[i]) {
        case "--impl" -> impl = value;
        case "--topic" -> topic = value;
        case "--group" -> group = value;
        case "--reader-id" -> readerId = value;
        case "--history" -> history = value;
        case "--commit" -> commit = value;
        case "--stop-file" -> stopFile = value;
        case "--stats" -> statsFile = value;
        case "--idle-exit" -> idleExit = Double.parseDouble(value);
        case "--delay-ms" -> delayMs = Long.parseLong(value);
        case "--property" -> {
          int eq = value.indexOf('=');
          props.put(value.substring(0, eq), value.substring(eq + 1));
        }
        default -> throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    if (args.length % 2 != 0 || topic == null || group == null || readerId == null
        || history == null) {
      System.err.println("usage: VerifiableReader --topic T --group G --reader-id R --history H "
          + "[--impl ordered|kafka] [--commit auto|sync] [--stop-file F] [--stats S] "
          + "[--idle-exit SECONDS] [--delay-ms N] [--property k=v ...]");
      System.exit(2);
    }
    onSignals();
    props.put("group.id", group);
    props.put("enable.auto.commit", String.valueOf(commit.equals("auto")));
    props.putIfAbsent("auto.offset.reset", "earliest");
    VerifiableReader self = new VerifiableReader(group, readerId, history);
    self.run(impl, topic, commit, stopFile, statsFile, idleExit, delayMs, props);
    System.out.println("DONE");
    System.out.flush();
  }

  private void run(String impl, String topic, String commit, String stopFile, String statsFile,
      double idleExit, long delayMs, Properties props) throws Exception {
    Consumer<String, String> consumer = impl.equals("kafka")
        ? new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())
        : new OrderedKafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    newPass("start");
    flush();
    consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        if (!partitions.isEmpty()) newPass("revoke");
      }

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        if (!partitions.isEmpty()) newPass("assign");
      }

      @Override
      public void onPartitionsLost(Collection<TopicPartition> partitions) {
        newPass("lost");
      }
    });
    System.out.println("READY");
    System.out.flush();
    Map<TopicPartition, Long> lastHeld = new HashMap<>();
    Map<TopicPartition, Long> lastCommitted = new HashMap<>();
    Path stop = stopFile == null ? null : Path.of(stopFile);
    long quietSince = System.nanoTime();
    long nextStats = 0;
    try {
      while (!stopSignalled && (stop == null || !Files.exists(stop))) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
        for (ConsumerRecord<String, String> r : records) {
          String[] parts = r.value() == null ? new String[0] : r.value().split("\\|", 3);
          if (parts.length < 3) continue;
          delivered++;
          event("{\"ev\":\"dlv\",\"g\":" + q(group) + ",\"r\":" + q(reader) + ",\"n\":" + pass
              + ",\"p\":" + q(parts[0]) + ",\"k\":" + q(r.key()) + ",\"s\":" + parts[1]
              + ",\"tp\":" + r.partition() + ",\"o\":" + r.offset()
              + ",\"e\":-1,\"ts\":" + System.nanoTime() + "}");
        }
        if (consumer instanceof OrderedKafkaConsumer<String, String> ordered) {
          Map<TopicPartition, Long> held =
              new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
          held.putAll(ordered.heldPartitions());
          if (!held.equals(lastHeld)) {
            StringBuilder h = new StringBuilder();
            for (Map.Entry<TopicPartition, Long> e : held.entrySet()) {
              if (h.length() > 0) h.append(',');
              h.append('[').append(e.getKey().partition()).append(',').append(e.getValue())
                  .append(']');
            }
            event("{\"ev\":\"held\",\"r\":" + q(reader) + ",\"held\":[" + h + "],\"ts\":"
                + System.nanoTime() + "}");
            lastHeld = new HashMap<>(held);
          }
        }
        // Recorded before committed: whatever the group counts as consumed is in the history.
        flush();
        if (commit.equals("sync") && !records.isEmpty()) {
          commitAndRecord(consumer, topic, lastCommitted);
        }
        long now = System.nanoTime();
        // A member between a revocation and its next assignment has nothing to read yet: not
        // idle (a stopped and continued member waits out a rebalance before catching up).
        if (!records.isEmpty() || consumer.assignment().isEmpty()) {
          quietSince = now;
        } else if (drainAt >= 0 && now - Math.max(quietSince, drainAt) > idleExit * 1e9) {
          break;
        }
        if (statsFile != null && now >= nextStats) {
          nextStats = now + 1_000_000_000L;
          writeStats(statsFile, stats(false));
        }
        if (delayMs > 0 && !records.isEmpty()) Thread.sleep(delayMs);
      }
    } finally {
      try {
        consumer.close();
      } finally {
        flush();
        out.close();
        if (statsFile != null) writeStats(statsFile, stats(true));
      }
    }
  }

  private void commitAndRecord(Consumer<String, String> consumer, String topic,
      Map<TopicPartition, Long> lastCommitted) throws IOException {
    try {
      consumer.commitSync();
    } catch (CommitFailedException | RebalanceInProgressException | RetriableException e) {
      // A rebalance or a coordinator move: the next batch's commit covers these records.
      return;
    }
    // What commitSync() wrote, read back (the layer may commit less than the positions).
    Map<TopicPartition, Long> positions =
        new TreeMap<>(Comparator.comparingInt(TopicPartition::partition));
    try {
      consumer.committed(consumer.assignment()).forEach((tp, om) -> {
        if (om != null) positions.put(tp, om.offset());
      });
    } catch (RetriableException e) {
      return;
    }
    long ts = System.nanoTime();
    for (Map.Entry<TopicPartition, Long> e : positions.entrySet()) {
      if (e.getValue().equals(lastCommitted.get(e.getKey()))) continue;
      lastCommitted.put(e.getKey(), e.getValue());
      event("{\"ev\":\"cmt\",\"g\":" + q(group) + ",\"r\":" + q(reader) + ",\"t\":" + q(topic)
          + ",\"tp\":" + e.getKey().partition() + ",\"o\":" + e.getValue()
          + ",\"why\":\"commit\",\"ts\":" + ts + "}");
    }
    flush();
  }
}
