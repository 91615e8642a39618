package org.orderedkafka;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * The znode records the plugins read and write, in the JSON of
 * {@code coordinator/kernel/store/records.py} (sorted keys, a {@code "version"}), and their paths
 * ({@code coordinator/kernel/store/paths.py}).
 *
 * <ul>
 *   <li>{@link TopicRecord} (read; versions 1 and 2, version 1 reads as {@code topic_id: null});
 *   <li>the producer registration {@code ProducerRecord} version 2, written with
 *       {@code "language": "java"};
 *   <li>{@code AckRecord} version 1, written exactly as Python writes it;
 *   <li>the consumer's {@code GroupMemberRecord} version 1, written with {@code "language": "java"};
 *   <li>{@code AclPolicyRecord} version 1 (read: who owns what under the root).
 * </ul>
 */
public final class Records {
  private Records() {}

  static final Pattern TOPIC = Pattern.compile("[A-Za-z0-9._-]{1,249}");

  // --- paths ---------------------------------------------------------------------------

  static String join(String root, String rest) {
    return (root.equals("/") ? "" : root) + rest;
  }

  static String topicPath(String root, String topic) {
    return join(root, "/topics/" + topic);
  }

  static String producersPath(String root, String topic) {
    return topicPath(root, topic) + "/producers";
  }

  static String producerPath(String root, String topic, String id) {
    return producersPath(root, topic) + "/" + id;
  }

  static String epochPath(String root, String topic, long epoch) {
    return topicPath(root, topic) + "/epochs/" + String.format("%010d", epoch);
  }

  static String acksPath(String root, String topic, long epoch) {
    return epochPath(root, topic, epoch) + "/acks";
  }

  static String ackPath(String root, String topic, long epoch, String id) {
    return acksPath(root, topic, epoch) + "/" + id;
  }

  static String aclPolicyPath(String root) {
    return join(root, "/acl");
  }

  static boolean validTopic(String topic) {
    return topic != null && TOPIC.matcher(topic).matches() && !topic.equals(".") && !topic.equals("..");
  }

  // --- records -------------------------------------------------------------------------

  /** Unix time now, as the records store it (seconds, a float). */
  static double now() {
    return System.currentTimeMillis() / 1000.0;
  }

  /** The registration ({@code ProducerRecord} version 2) of a Java producer. */
  static byte[] producerRecord(
      String id, String host, long pid, int deliveryTimeoutMs, double registeredAt, String clientId) {
    Map<String, Object> m = new TreeMap<>();
    m.put("version", 2L);
    m.put("id", id);
    m.put("host", host);
    m.put("pid", pid);
    m.put("delivery_timeout_ms", (long) deliveryTimeoutMs);
    m.put("registered_at", registeredAt);
    m.put("client_id", clientId);
    m.put("language", "java");
    return Json.write(m).getBytes(StandardCharsets.UTF_8);
  }

  /** The member record ({@code GroupMemberRecord} version 1) of a Java consumer. */
  static byte[] groupMemberRecord(
      String member, String group, String clientId, String host, long pid, double registeredAt) {
    Map<String, Object> m = new TreeMap<>();
    m.put("version", 1L);
    m.put("member", member);
    m.put("group", group);
    m.put("client_id", clientId);
    m.put("host", host);
    m.put("pid", pid);
    m.put("language", "java");
    m.put("registered_at", registeredAt);
    return Json.write(m).getBytes(StandardCharsets.UTF_8);
  }

  /** An {@code AckRecord}: {@code last_offsets} maps partition to the last offset written under an older epoch. */
  static byte[] ackRecord(String id, long epoch, Map<Integer, Long> lastOffsets, double ackedAt) {
    Map<String, Object> offsets = new TreeMap<>();
    for (Map.Entry<Integer, Long> e : lastOffsets.entrySet()) {
      offsets.put(String.valueOf(e.getKey()), e.getValue());
    }
    Map<String, Object> m = new TreeMap<>();
    m.put("version", 1L);
    m.put("id", id);
    m.put("epoch", epoch);
    m.put("last_offsets", offsets);
    m.put("acked_at", ackedAt);
    return Json.write(m).getBytes(StandardCharsets.UTF_8);
  }

  /** A record that fails its check (Python's {@code RecordCorruptError}). */
  public static final class CorruptRecordException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CorruptRecordException(String message) {
      super(message);
    }
  }

  /** The layout of an adopted topic, as {@code TopicRecord} (version 2) holds it. */
  public static final class TopicRecord {
    public final String topic;
    public final String topicId;
    public final int initial;
    public final int active;
    public final long epoch;
    /** The pending epoch, or -1. */
    public final long pending;

    public final int physical;
    public final String algorithm;
    public final boolean ordered;
    public final boolean compacted;

    TopicRecord(
        String topic,
        String topicId,
        int initial,
        int active,
        long epoch,
        long pending,
        int physical,
        String algorithm,
        boolean ordered,
        boolean compacted) {
      this.topic = topic;
      this.topicId = topicId;
      this.initial = initial;
      this.active = active;
      this.epoch = epoch;
      this.pending = pending;
      this.physical = physical;
      this.algorithm = algorithm;
      this.ordered = ordered;
      this.compacted = compacted;
    }

    /** Newer than {@code other}: a later epoch, or the same epoch sealed. */
    boolean olderThan(TopicRecord other) {
      if (epoch != other.epoch) {
        return epoch < other.epoch;
      }
      return pending >= 0 && other.pending < 0;
    }

    /**
     * Parse a topic znode's data; empty data (a node made by a registration) is "not adopted".
     *
     * @return the record, or null when not adopted
     * @throws CorruptRecordException the record fails its check
     */
    static TopicRecord parse(byte[] data, String path) {
      if (data == null || data.length == 0) {
        return null;
      }
      Map<String, Object> m = object(data, path);
      long version = integer(m, "version", path);
      if (version > 2) {
        // A newer release wrote it (a rolling upgrade not yet done here): say what to do, in
        // the words of the Python reader, not only that the record does not parse.
        throw new CorruptRecordException(
            path
                + ": TopicRecord has version "
                + version
                + ", newer than 2, the newest this ordered-kafka reads: a newer ordered-kafka"
                + " wrote it; upgrade this client (see \"Upgrading\" in docs/operations.md)");
      }
      if (version != 1 && version != 2) {
        throw new CorruptRecordException(
            path + ": has version " + version + "; this ordered reads version 1, 2");
      }
      Object id = m.get("topic_id");
      if (version == 2 && !m.containsKey("topic_id")) {
        throw new CorruptRecordException(path + ": missing field topic_id");
      }
      if (id != null && !(id instanceof String)) {
        throw new CorruptRecordException(path + ": topic_id: expected a string or null");
      }
      Object pending = m.get("pending");
      if (!m.containsKey("pending")) {
        throw new CorruptRecordException(path + ": missing field pending");
      }
      String algorithm = string(m, "algorithm", path);
      if (!List.of(Hashing.MURMUR3, Hashing.MURMUR2, Hashing.CRC32).contains(algorithm)) {
        throw new CorruptRecordException(path + ": algorithm: unknown " + algorithm);
      }
      TopicRecord record =
          new TopicRecord(
              string(m, "topic", path),
              (String) id,
              (int) integer(m, "initial", path),
              (int) integer(m, "active", path),
              integer(m, "epoch", path),
              pending == null ? -1 : integer(m, "pending", path),
              (int) integer(m, "physical", path),
              algorithm,
              bool(m, "ordered", path),
              bool(m, "compacted", path));
      if (record.initial < 1 || record.active < record.initial || record.physical < record.active) {
        throw new CorruptRecordException(path + ": counts are not a layout");
      }
      if (record.pending >= 0 && record.pending != record.epoch) {
        throw new CorruptRecordException(path + ": pending is not the latest epoch");
      }
      return record;
    }

    @Override
    public String toString() {
      return "TopicRecord(" + topic + " " + initial + "/" + active + " epoch " + epoch
          + (pending >= 0 ? " pending" : "") + ")";
    }
  }

  /** Who may do what under a root ({@code AclPolicyRecord}): the identities by role. */
  public static final class AclPolicy {
    final List<String> coordinator;
    final List<String> producers;
    final List<String> consumers;
    final List<String> readers;

    AclPolicy(List<String> coordinator, List<String> producers, List<String> consumers, List<String> readers) {
      this.coordinator = coordinator;
      this.producers = producers;
      this.consumers = consumers;
      this.readers = readers;
    }

    static AclPolicy parse(byte[] data, String path) {
      if (data == null || data.length == 0) {
        return null;
      }
      Map<String, Object> m = object(data, path);
      return new AclPolicy(
          strings(m, "coordinator", path),
          strings(m, "producers", path),
          strings(m, "consumers", path),
          strings(m, "readers", path));
    }
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> object(byte[] data, String path) {
    Object parsed;
    try {
      parsed = Json.parse(new String(data, StandardCharsets.UTF_8));
    } catch (IllegalArgumentException exc) {
      throw new CorruptRecordException(path + ": not JSON (" + exc.getMessage() + ")");
    }
    if (!(parsed instanceof Map)) {
      throw new CorruptRecordException(path + ": expected a JSON object");
    }
    return (Map<String, Object>) parsed;
  }

  private static long integer(Map<String, Object> m, String key, String path) {
    Object v = m.get(key);
    if (!(v instanceof Long) || (Long) v < 0) {
      throw new CorruptRecordException(path + ": " + key + ": expected a non-negative integer, got " + v);
    }
    return (Long) v;
  }

  private static String string(Map<String, Object> m, String key, String path) {
    Object v = m.get(key);
    if (!(v instanceof String)) {
      throw new CorruptRecordException(path + ": " + key + ": expected a string, got " + v);
    }
    return (String) v;
  }

  private static boolean bool(Map<String, Object> m, String key, String path) {
    Object v = m.get(key);
    if (!(v instanceof Boolean)) {
      throw new CorruptRecordException(path + ": " + key + ": expected a boolean, got " + v);
    }
    return (Boolean) v;
  }

  @SuppressWarnings("unchecked")
  private static List<String> strings(Map<String, Object> m, String key, String path) {
    Object v = m.get(key);
    if (!(v instanceof List)) {
      throw new CorruptRecordException(path + ": " + key + ": expected a list of identities");
    }
    for (Object item : (List<Object>) v) {
      if (!(item instanceof String)) {
        throw new CorruptRecordException(path + ": " + key + ": expected a list of identities");
      }
    }
    return (List<String>) (List<?>) v;
  }
}
