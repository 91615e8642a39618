package org.orderedkafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import org.apache.kafka.common.config.ConfigException;

/**
 * The {@code ordered.*} settings of the JVM plugins, checked with the same rules and the
 * same messages as the Python producer ({@code ordered/settings.py},
 * {@code ordered/producer/config.py}, {@code coordinator/kernel/zk_auth.py}).
 *
 * <p>Every problem is a {@link ConfigException} with one line naming the key, thrown from
 * {@code configure()} (so {@code new KafkaProducer(...)} fails, never the first record).
 * Credentials are never echoed. Besides the {@code ordered.*} keys this checks the pair
 * itself ({@code partitioner.class} and {@code interceptor.classes} name both classes) and
 * the Kafka settings the ordering needs: the idempotent producer ({@code enable.idempotence}
 * not false, {@code acks} all).
 *
 * <p>What the JVM plugins do not take (a partitioner cannot add headers, and Python hook
 * objects do not exist here): {@code ordered.epoch.header=true} and {@code ordered.hooks}
 * are refused with a message that says so.
 */
public final class OrderedSettings {
  public static final String CONNECT = "ordered.zookeeper.connect";
  public static final String ROOT = "ordered.zookeeper.root";
  public static final String AUTH = "ordered.zookeeper.auth";
  public static final String SESSION_TIMEOUT = "ordered.zookeeper.session.timeout.ms";
  public static final String EPOCH_HEADER = "ordered.epoch.header";
  public static final String EPOCH_HEADER_NAME = "ordered.epoch.header.name";
  public static final String SWITCH_MODE = "ordered.switch.mode";
  public static final String HOOKS = "ordered.hooks";
  public static final String SSL_ENABLE = "ordered.zookeeper.ssl.client.enable";
  public static final String SSL_CA = "ordered.zookeeper.ssl.ca.location";
  public static final String SSL_CERTIFICATE = "ordered.zookeeper.ssl.certificate.location";
  public static final String SSL_KEY = "ordered.zookeeper.ssl.key.location";
  public static final String SSL_IDENTIFICATION =
      "ordered.zookeeper.ssl.endpoint.identification.algorithm";

  public static final String VIOLATION_POLICY = "ordered.violation.policy";
  public static final String HEADER_AUDIT = "ordered.epoch.header.audit";
  public static final String KEY_AUDIT = "ordered.key.audit";
  public static final String GATE_POLL_INTERVAL = "ordered.gate.poll.interval.ms";
  public static final String AUDIT_EVERY = "ordered.audit.every";
  public static final String CHECK_RATE = "ordered.layout.check.max.requests.per.s";
  public static final String COMMIT_MODE = "ordered.commit.mode";
  public static final String POSITIONS = "ordered.positions";

  /** Keys that were consumer settings once: accepted and ignored (Python's {@code REMOVED}). */
  static final List<String> REMOVED = List.of("ordered.fetch.favour.sources");

  /** The consumer's keys, as {@code keys_for(Role.CONSUMER)} lists them. */
  static final List<String> CONSUMER_KNOWN =
      List.of(
          CONNECT, ROOT, AUTH, SESSION_TIMEOUT, SSL_ENABLE, SSL_CA, SSL_CERTIFICATE, SSL_KEY,
          SSL_IDENTIFICATION, EPOCH_HEADER_NAME, VIOLATION_POLICY, HEADER_AUDIT, KEY_AUDIT,
          GATE_POLL_INTERVAL, AUDIT_EVERY, CHECK_RATE, COMMIT_MODE, POSITIONS, HOOKS);

  /** The producer's keys, as {@code keys_for(Role.PRODUCER)} lists them. */
  static final List<String> KNOWN =
      List.of(
          CONNECT, ROOT, AUTH, SESSION_TIMEOUT, EPOCH_HEADER, EPOCH_HEADER_NAME, SWITCH_MODE, HOOKS,
          SSL_ENABLE, SSL_CA, SSL_CERTIFICATE, SSL_KEY, SSL_IDENTIFICATION);

  /**
   * A consumer's default session timeout, as {@code CONSUMER_SESSION_TIMEOUT_MS} of
   * ordered/settings.py: an idle consumer's only ZooKeeper requests are the session's pings.
   */
  static final int CONSUMER_SESSION_TIMEOUT_MS = 18_000;

  /** Java's default {@code delivery.timeout.ms} (what the registration declares when unset). */
  public static final int JAVA_DEFAULT_DELIVERY_TIMEOUT_MS = 120_000;

  static final String PARTITIONER = "org.orderedkafka.OrderedPartitioner";
  static final String INTERCEPTOR = "org.orderedkafka.OrderedProducerInterceptor";

  public final String zookeeperConnect;
  public final String root;
  /** {@code ""} (none) or {@code digest}. */
  public final String authScheme;

  public final String authUser;
  final String authPassword;
  public final int sessionTimeoutMs;
  public final String switchMode;
  public final String epochHeaderName;
  public final int deliveryTimeoutMs;
  public final String clientId;
  public final long maxBlockMs;
  public final int batchSize;
  /** ZooKeeper over TLS ({@code ordered.zookeeper.ssl.client.enable}). */
  public final boolean tls;
  /** The PEM CA file ZooKeeper's certificate is checked against; {@code ""}: the JVM's trust store. */
  public final String tlsCa;
  /** Whether ZooKeeper's certificate must name the host connected to ({@code https}). */
  public final boolean tlsHostnameCheck;
  // The consumer's settings (at their defaults in a producer's).
  /** {@code log} or {@code raise}. */
  public final String violationPolicy;

  public final boolean headerAudit;
  public final boolean keyAudit;
  public final int gatePollIntervalMs;
  public final int auditEvery;
  /** ZooKeeper requests per second the fetch checks may send on average; 0: no pacing. */
  public final int checkRate;
  /** {@code auto} or {@code application}. */
  public final String commitMode;

  public final boolean positions;

  private OrderedSettings(Map<String, ?> config, boolean consumer) {
    List<String> known = consumer ? CONSUMER_KNOWN : KNOWN;
    List<String> unknown = new ArrayList<>();
    for (String key : config.keySet()) {
      if (key.startsWith("ordered.") && !known.contains(key) && !(consumer && REMOVED.contains(key))) {
        unknown.add(key);
      }
    }
    if (!unknown.isEmpty()) {
      unknown.sort(null);
      throw new ConfigException(
          "unknown setting(s) "
              + String.join(", ", unknown)
              + " (known: "
              + String.join(", ", new TreeSet<>(known))
              + ")");
    }
    Object connect = config.get(CONNECT);
    if (connect == null) {
      throw new ConfigException(CONNECT + " is required (the layout store)");
    }
    zookeeperConnect = parseStr(CONNECT, connect);
    root = config.containsKey(ROOT) ? parseRoot(ROOT, config.get(ROOT)) : "/ordered";
    String[] auth = parseAuth(AUTH, config.get(AUTH));
    authScheme = auth[0];
    authUser = auth[1];
    authPassword = auth[2];
    sessionTimeoutMs =
        config.containsKey(SESSION_TIMEOUT)
            ? parseInt(SESSION_TIMEOUT, config.get(SESSION_TIMEOUT), 1)
            : consumer ? CONSUMER_SESSION_TIMEOUT_MS : 10_000;
    violationPolicy =
        config.containsKey(VIOLATION_POLICY)
            ? parseChoice(VIOLATION_POLICY, config.get(VIOLATION_POLICY), "log", "raise")
            : "log";
    headerAudit = config.containsKey(HEADER_AUDIT) && parseBool(HEADER_AUDIT, config.get(HEADER_AUDIT));
    keyAudit = !config.containsKey(KEY_AUDIT) || parseBool(KEY_AUDIT, config.get(KEY_AUDIT));
    gatePollIntervalMs =
        config.containsKey(GATE_POLL_INTERVAL)
            ? parseInt(GATE_POLL_INTERVAL, config.get(GATE_POLL_INTERVAL), 1, 86_400_000)
            : 100;
    auditEvery =
        config.containsKey(AUDIT_EVERY)
            ? parseInt(AUDIT_EVERY, config.get(AUDIT_EVERY), 1, Integer.MAX_VALUE)
            : 16;
    checkRate =
        config.containsKey(CHECK_RATE)
            ? parseInt(CHECK_RATE, config.get(CHECK_RATE), 0, 1_000_000)
            : 16;
    commitMode =
        config.containsKey(COMMIT_MODE)
            ? parseChoice(COMMIT_MODE, config.get(COMMIT_MODE), "auto", "application")
            : "auto";
    positions = !config.containsKey(POSITIONS) || parseBool(POSITIONS, config.get(POSITIONS));
    if (config.containsKey(EPOCH_HEADER) && parseBool(EPOCH_HEADER, config.get(EPOCH_HEADER))) {
      throw new ConfigException(
          EPOCH_HEADER
              + "=true is not supported by the JVM plugins: a partitioner cannot add headers "
              + "(the header is an opt-in audit aid; leave it false)");
    }
    epochHeaderName =
        config.containsKey(EPOCH_HEADER_NAME)
            ? parseStr(EPOCH_HEADER_NAME, config.get(EPOCH_HEADER_NAME))
            : "ordered.epoch";
    switchMode = config.containsKey(SWITCH_MODE) ? parseSwitchMode(SWITCH_MODE, config.get(SWITCH_MODE)) : "track";
    tls = config.containsKey(SSL_ENABLE) && parseBool(SSL_ENABLE, config.get(SSL_ENABLE));
    tlsCa = parseFile(SSL_CA, config.get(SSL_CA));
    String certificate = parseFile(SSL_CERTIFICATE, config.get(SSL_CERTIFICATE));
    String key = parseFile(SSL_KEY, config.get(SSL_KEY));
    tlsHostnameCheck =
        !config.containsKey(SSL_IDENTIFICATION)
            || parseIdentification(SSL_IDENTIFICATION, config.get(SSL_IDENTIFICATION));
    List<String> files = new ArrayList<>();
    for (String[] kv : new String[][] {{SSL_CA, tlsCa}, {SSL_CERTIFICATE, certificate}, {SSL_KEY, key}}) {
      if (!kv[1].isEmpty()) {
        files.add(kv[0]);
      }
    }
    if (!files.isEmpty() && !tls) {
      throw new ConfigException(
          String.join(", ", files) + " set but " + SSL_ENABLE + " is false: set " + SSL_ENABLE
              + "=true to connect to ZooKeeper over TLS");
    }
    if (certificate.isEmpty() != key.isEmpty()) {
      throw new ConfigException(SSL_CERTIFICATE + " and " + SSL_KEY + " go together: set both or neither");
    }
    if (!certificate.isEmpty()) {
      throw new ConfigException(
          SSL_CERTIFICATE + ": a client certificate is not supported by the JVM plugins yet "
              + "(ZooKeeper's Java client takes it as one key store file); authenticate with "
              + AUTH);
    }
    if (config.containsKey(HOOKS) && !isEmpty(config.get(HOOKS))) {
      throw new ConfigException(
          HOOKS + ": hook objects are Python objects; the JVM plugins take none (leave it unset)");
    }
    if (consumer) {
      deliveryTimeoutMs = JAVA_DEFAULT_DELIVERY_TIMEOUT_MS;
      Object id = config.get("client.id");
      clientId = id == null ? "" : String.valueOf(id);
      maxBlockMs = 60_000L;
      batchSize = 16_384;
      return;
    }
    Object idempotence = config.get("enable.idempotence");
    if (idempotence != null && !parseBool("enable.idempotence", idempotence)) {
      throw new ConfigException(
          "enable.idempotence=false is not allowed: per-partition order across retries "
              + "needs the idempotent producer (the ordering layer turns it on)");
    }
    Object acks = config.get("acks");
    if (acks != null) {
      String text = String.valueOf(acks).trim().toLowerCase(Locale.ROOT);
      if (!text.equals("all") && !text.equals("-1")) {
        throw new ConfigException(
            "acks="
                + text
                + " is not allowed: per-partition order across retries needs the idempotent "
                + "producer, which needs acks=all");
      }
    }
    // kafka-clients turns idempotence off without a word when these conflict with it and
    // enable.idempotence was left unset: refuse them instead.
    Object inflight = config.get("max.in.flight.requests.per.connection");
    if (inflight != null && parseInt("max.in.flight.requests.per.connection", inflight, 1) > 5) {
      throw new ConfigException(
          "max.in.flight.requests.per.connection=" + inflight + " is not allowed: per-partition order "
              + "across retries needs the idempotent producer, which allows at most 5");
    }
    Object retries = config.get("retries");
    if (retries != null && parseInt("retries", retries, 0) == 0) {
      throw new ConfigException(
          "retries=0 is not allowed: per-partition order across retries needs the idempotent "
              + "producer, which needs retries");
    }
    Object timeout = config.get("delivery.timeout.ms");
    deliveryTimeoutMs =
        timeout == null ? JAVA_DEFAULT_DELIVERY_TIMEOUT_MS : parseInt("delivery.timeout.ms", timeout, 1);
    Object id = config.get("client.id");
    clientId = id == null ? "" : String.valueOf(id);
    Object block = config.get("max.block.ms");
    maxBlockMs = block == null ? 60_000L : parseInt("max.block.ms", block, 0);
    Object batch = config.get("batch.size");
    batchSize = batch == null ? 16_384 : Math.max(1, parseInt("batch.size", batch, 0));
  }

  /**
   * Check a producer configuration (as {@code configure()} receives it).
   *
   * @param self which plugin is being configured (its class name): the other one of the pair
   *     must be named too
   * @throws ConfigException a missing or malformed setting, or half of the pair
   */
  public static OrderedSettings parse(Map<String, ?> config, String self) {
    if (self.equals(PARTITIONER) && !names(config.get("interceptor.classes")).contains(INTERCEPTOR)) {
      throw new ConfigException(
          "interceptor.classes must include "
              + INTERCEPTOR
              + ": OrderedPartitioner needs it to see acknowledgements (the layout barrier)");
    }
    if (self.equals(INTERCEPTOR) && !names(config.get("partitioner.class")).contains(PARTITIONER)) {
      throw new ConfigException(
          "partitioner.class must be "
              + PARTITIONER
              + ": OrderedProducerInterceptor works only together with it");
    }
    return new OrderedSettings(config, false);
  }

  /**
   * Check the {@code ordered.*} keys of a consumer configuration ({@code OrderedKafkaConsumer}):
   * the Python consumer's keys, rules and messages. The Kafka keys the consumer itself needs
   * are checked by the consumer.
   *
   * @throws ConfigException an unknown, missing or malformed setting
   */
  public static OrderedSettings parseConsumer(Map<String, ?> config) {
    return new OrderedSettings(config, true);
  }

  /** Class names of a {@code partitioner.class}/{@code interceptor.classes} value in any form Kafka takes. */
  static List<String> names(Object value) {
    List<String> out = new ArrayList<>();
    if (value == null) {
      return out;
    }
    if (value instanceof Class) {
      out.add(((Class<?>) value).getName());
    } else if (value instanceof Collection) {
      for (Object item : (Collection<?>) value) {
        out.addAll(names(item));
      }
    } else {
      for (String part : String.valueOf(value).split(",")) {
        if (!part.trim().isEmpty()) {
          out.add(part.trim());
        }
      }
    }
    return out;
  }

  private static boolean isEmpty(Object value) {
    if (value instanceof Collection) {
      return ((Collection<?>) value).isEmpty();
    }
    return String.valueOf(value).trim().isEmpty();
  }

  /** Python's {@code repr} of a setting value, for messages. */
  static String repr(Object value) {
    if (value instanceof String) {
      return "'" + value + "'";
    }
    if (value instanceof Boolean) {
      return ((Boolean) value) ? "True" : "False";
    }
    return String.valueOf(value);
  }

  static String parseStr(String key, Object value) {
    if (!(value instanceof String) || ((String) value).trim().isEmpty()) {
      throw new ConfigException(key + ": expected a non-empty string, got " + repr(value));
    }
    return ((String) value).trim();
  }

  static String parseRoot(String key, Object value) {
    String root = parseStr(key, value);
    if (!root.startsWith("/") || (root.length() > 1 && root.endsWith("/"))) {
      throw new ConfigException(
          key + ": expected an absolute znode path like /ordered, got " + repr(root));
    }
    return root;
  }

  static int parseInt(String key, Object value, int minimum) {
    long number;
    if (value instanceof Boolean) {
      throw new ConfigException(key + ": expected an integer, got " + repr(value));
    } else if (value instanceof Integer || value instanceof Long || value instanceof Short) {
      number = ((Number) value).longValue();
    } else if (value instanceof String && ((String) value).trim().matches("-?[0-9]+")) {
      try {
        number = Long.parseLong(((String) value).trim());
      } catch (NumberFormatException exc) {
        throw new ConfigException(key + ": expected an integer, got " + repr(value));
      }
    } else {
      throw new ConfigException(key + ": expected an integer, got " + repr(value));
    }
    if (number < minimum) {
      throw new ConfigException(key + ": must be >= " + minimum + ", got " + number);
    }
    return (int) Math.min(number, Integer.MAX_VALUE);
  }

  /** An integer in {@code [minimum, maximum]}, with Python's {@code parse_int} messages. */
  static int parseInt(String key, Object value, int minimum, int maximum) {
    int number = parseInt(key, value, minimum);
    if (number > maximum) {
      throw new ConfigException(
          key + ": must be between " + minimum + " and " + maximum + ", got " + number);
    }
    return number;
  }

  /** One of {@code choices} (as given, trimmed), with Python's {@code _one_of} message. */
  static String parseChoice(String key, Object value, String... choices) {
    String text = parseStr(key, value).toLowerCase(Locale.ROOT);
    for (String c : choices) {
      if (c.equals(text)) {
        return c;
      }
    }
    throw new ConfigException(
        key + ": expected one of " + String.join(", ", choices) + ", got " + repr(value));
  }

  static boolean parseBool(String key, Object value) {
    if (value instanceof Boolean) {
      return (Boolean) value;
    }
    if (value instanceof Integer && ((Integer) value == 0 || (Integer) value == 1)) {
      return (Integer) value == 1;
    }
    if (value instanceof String) {
      String text = ((String) value).trim().toLowerCase(Locale.ROOT);
      if (text.equals("true") || text.equals("t") || text.equals("1")) {
        return true;
      }
      if (text.equals("false") || text.equals("f") || text.equals("0")) {
        return false;
      }
    }
    throw new ConfigException(key + ": expected a boolean (true or false), got " + repr(value));
  }

  /** A readable regular file, or {@code ""} when unset or empty (as in Kafka's properties). */
  static String parseFile(String key, Object value) {
    if (value == null) {
      return "";
    }
    if (!(value instanceof String)) {
      throw new ConfigException(key + ": expected the path of a PEM file, got " + repr(value));
    }
    String text = ((String) value).trim();
    if (text.isEmpty()) {
      return "";
    }
    java.io.File file;
    try {
      file = new java.io.File(text);
      if (!file.isFile()) {
        throw new ConfigException(key + ": no such file: " + repr(text));
      }
    } catch (SecurityException exc) {
      throw new ConfigException(key + ": no such file: " + repr(text));
    }
    if (!file.canRead()) {
      throw new ConfigException(key + ": the file " + repr(text) + " is not readable");
    }
    return text;
  }

  /** {@code https} (true) or {@code none}/empty (false). */
  static boolean parseIdentification(String key, Object value) {
    if (value instanceof String) {
      String text = ((String) value).trim().toLowerCase(Locale.ROOT);
      if (text.equals("https")) {
        return true;
      }
      if (text.isEmpty() || text.equals("none")) {
        return false;
      }
    }
    throw new ConfigException(key + ": expected one of https, none, got " + repr(value));
  }

  static String parseSwitchMode(String key, Object value) {
    String mode = parseStr(key, value).toLowerCase(Locale.ROOT);
    if (!mode.equals("track") && !mode.equals("pause")) {
      throw new ConfigException(key + ": expected one of track, pause, got " + repr(value));
    }
    return mode;
  }

  /** {@code [scheme, user, password]}; {@code ["", "", ""]} without authentication. */
  static String[] parseAuth(String key, Object value) {
    if (value == null || (value instanceof String && ((String) value).trim().isEmpty())) {
      return new String[] {"", "", ""};
    }
    if (!(value instanceof String)) {
      throw new ConfigException(
          key + ": expected SCHEME:USER:PASSWORD, got a " + value.getClass().getSimpleName());
    }
    String text = ((String) value).trim();
    int first = text.indexOf(':');
    String scheme = first < 0 ? text : text.substring(0, first);
    String rest = first < 0 ? "" : text.substring(first + 1);
    int second = rest.indexOf(':');
    String user = second < 0 ? rest : rest.substring(0, second);
    String password = second < 0 ? "" : rest.substring(second + 1);
    if (!scheme.equals("digest") && !scheme.equals("sasl")) {
      throw new ConfigException(
          key
              + ": expected SCHEME:USER:PASSWORD with SCHEME one of digest, sasl (the value is not shown)");
    }
    if (user.isEmpty() || password.isEmpty()) {
      throw new ConfigException(
          key
              + ": expected "
              + scheme
              + ":USER:PASSWORD with a user and a password (the value is not shown)");
    }
    if (scheme.equals("sasl")) {
      throw new ConfigException(
          key
              + ": sasl is not supported by the JVM plugins yet; use digest:USER:PASSWORD "
              + "(the value is not shown)");
    }
    return new String[] {scheme, user, password};
  }

  /** The digest credentials as ZooKeeper's {@code addauth} takes them, or null. */
  byte[] digestAuth() {
    return authScheme.isEmpty() ? null : (authUser + ":" + authPassword).getBytes(StandardCharsets.UTF_8);
  }

  /** {@code scheme:user} (never the password), or {@code anonymous}. */
  public String principal() {
    return authScheme.isEmpty() ? "anonymous" : authScheme + ":" + authUser;
  }

  /** What identifies the shared ZooKeeper session: connect string, credentials and TLS. */
  String sessionKey() {
    return zookeeperConnect + "\u0000" + authScheme + ":" + authUser + ":" + authPassword
        + "\u0000" + tls + ":" + tlsCa + ":" + tlsHostnameCheck;
  }

  @Override
  public String toString() {
    return "OrderedSettings(connect=" + zookeeperConnect + ", root=" + root + ", auth=" + principal()
        + ", tls=" + (tls ? (tlsCa.isEmpty() ? "system CAs" : tlsCa) : "off") + ")";
  }
}
