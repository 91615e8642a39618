package org.orderedkafka.connect;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkTask;
import org.orderedkafka.OrderedSettings;

/**
 * The settings of the ordered sink wrapper, split three ways: the wrapper's own {@code
 * ordered.sink.*} keys, the {@code ordered.*} keys of the gate rule (checked by {@link
 * OrderedSettings#parseConsumer}, so the keys, rules and messages are the Java consumer's),
 * and everything else, which goes to the wrapped connector untouched.
 *
 * <p>Every problem is one {@link ConfigException} whose message starts with the key, thrown
 * before anything is opened, so a misconfigured connector fails at validation (the worker's
 * {@code PUT /connectors/.../config}, or {@code connect-standalone} at start) and never at its
 * first record.
 */
public final class SinkSettings {
  /** The wrapped sink connector's class (required), e.g. Kafka's FileStreamSinkConnector. */
  public static final String CONNECTOR_CLASS = "ordered.sink.connector.class";
  /**
   * Prefix of the admin client's settings ({@code ordered.sink.admin.bootstrap.servers}...):
   * a sink task is not given the worker's own settings, and the gates read the group's
   * committed offsets and the partitions' end offsets through an admin client.
   */
  public static final String ADMIN_PREFIX = "ordered.sink.admin.";

  /** The wrapped connector's task class, written into every task's settings by the connector. */
  static final String TASK_CLASS = "ordered.sink.task.class";
  /** The consumer group whose committed offsets are the progress, set by the connector. */
  static final String GROUP = "ordered.sink.group";

  /** The wrapper's own keys besides the admin client's (the last two are written by it). */
  private static final java.util.Set<String> OWN_KEYS = java.util.Set.of(CONNECTOR_CLASS, TASK_CLASS, GROUP);

  private static final String CONSUMER_OVERRIDE = "consumer.override.";
  private static final String[] ADMIN_FALLBACK = {"bootstrap.servers", "security.", "sasl.", "ssl."};

  /** The wrapped connector's class name. */
  public final String connectorClass;
  /** The gate rule's settings (ZooKeeper, poll interval, check rate). */
  public final OrderedSettings ordered;
  /** The {@code ordered.*} keys as given (without {@code ordered.sink.*}): copied to the tasks. */
  final Map<String, String> orderedConfig;
  /**
   * What the wrapped connector or task is given: every key but the {@code ordered.*} ones,
   * with {@code connector.class} naming the wrapped connector.
   */
  final Map<String, String> delegateConfig;
  /** The admin client's settings. */
  final Map<String, Object> admin;
  /** The Connect consumer group of this connector: {@code connect-<name>} unless overridden. */
  public final String group;

  private SinkSettings(Map<String, String> props) {
    Object cls = props.get(CONNECTOR_CLASS);
    if (cls == null || cls.toString().trim().isEmpty()) {
      throw new ConfigException(
          CONNECTOR_CLASS + " is required: the class of the sink connector to wrap (for example "
              + "org.apache.kafka.connect.file.FileStreamSinkConnector)");
    }
    connectorClass = cls.toString().trim();
    Map<String, String> mine = new TreeMap<>();
    Map<String, String> rest = new HashMap<>();
    java.util.TreeSet<String> unknown = new java.util.TreeSet<>();
    for (Map.Entry<String, String> e : props.entrySet()) {
      String key = e.getKey();
      if (key.startsWith("ordered.sink.")) {
        if (!key.startsWith(ADMIN_PREFIX) && !OWN_KEYS.contains(key)) {
          unknown.add(key);
        }
        continue;
      }
      if (key.startsWith("ordered.")) {
        mine.put(key, e.getValue());
      } else {
        rest.put(key, e.getValue());
      }
    }
    if (!unknown.isEmpty()) {
      throw new ConfigException(
          "unknown setting(s) " + String.join(", ", unknown) + " (known: " + CONNECTOR_CLASS
              + ", " + ADMIN_PREFIX + "*)");
    }
    orderedConfig = mine;
    if (rest.containsKey("connector.class")) {
      rest.put("connector.class", connectorClass); // the wrapped connector sees its own name
    }
    delegateConfig = rest;
    ordered = OrderedSettings.parseConsumer(new HashMap<String, Object>(mine));
    if ("application".equals(ordered.commitMode)) {
      throw new ConfigException(
          OrderedSettings.COMMIT_MODE + "=application is not supported by the Connect sink: the "
              + "worker commits the offsets (leave it auto)");
    }
    admin = adminConfig(props);
    String given = props.get(GROUP);
    if (given != null && !given.isEmpty()) {
      group = given;
    } else if (props.get(CONSUMER_OVERRIDE + "group.id") != null) {
      group = props.get(CONSUMER_OVERRIDE + "group.id");
    } else {
      String name = props.get("name");
      if (name == null || name.trim().isEmpty()) {
        throw new ConfigException("name is required: the connector's group is connect-<name>");
      }
      group = "connect-" + name.trim();
    }
  }

  /**
   * Check a connector's (or a task's) settings.
   *
   * @throws ConfigException a missing or malformed setting, named first in the message
   */
  public static SinkSettings parse(Map<String, String> props) {
    return new SinkSettings(props);
  }

  private static Map<String, Object> adminConfig(Map<String, String> props) {
    Map<String, Object> out = new HashMap<>();
    for (Map.Entry<String, String> e : props.entrySet()) {
      if (e.getKey().startsWith(ADMIN_PREFIX)) {
        out.put(e.getKey().substring(ADMIN_PREFIX.length()), e.getValue());
      }
    }
    if (!out.containsKey("bootstrap.servers")) {
      // The sink's consumer overrides name the same cluster when they name one.
      for (Map.Entry<String, String> e : props.entrySet()) {
        if (!e.getKey().startsWith(CONSUMER_OVERRIDE)) {
          continue;
        }
        String key = e.getKey().substring(CONSUMER_OVERRIDE.length());
        for (String prefix : ADMIN_FALLBACK) {
          if (key.startsWith(prefix)) {
            out.putIfAbsent(key, e.getValue());
          }
        }
      }
    }
    Object servers = out.get("bootstrap.servers");
    if (servers == null || servers.toString().trim().isEmpty()) {
      throw new ConfigException(
          ADMIN_PREFIX + "bootstrap.servers is required: the Kafka cluster the sink reads (a task "
              + "is not given the worker's settings; the gates read the group's committed offsets "
              + "there)");
    }
    return out;
  }

  /** A new instance of the wrapped connector. */
  SinkConnector newConnector() {
    return instantiate(CONNECTOR_CLASS, load(CONNECTOR_CLASS, connectorClass, SinkSettings.class.getClassLoader()), SinkConnector.class);
  }

  /**
   * A new instance of the wrapped connector's task class {@code name}, loaded by the loader of
   * the wrapped connector: a worker knows connectors by name across its plugins, not tasks.
   */
  SinkTask newTask(String name) {
    if (name == null || name.isEmpty()) {
      throw new ConfigException(
          TASK_CLASS + " is missing: task settings come from OrderedSinkConnector");
    }
    ClassLoader loader = load(CONNECTOR_CLASS, connectorClass, SinkSettings.class.getClassLoader()).getClassLoader();
    return instantiate(TASK_CLASS, load(TASK_CLASS, name, loader), SinkTask.class);
  }

  private static Class<?> load(String key, String name, ClassLoader loader) {
    try {
      // Under plugin.path isolation the plugin's own loader asks the worker's loader, which
      // knows every installed plugin's connectors, for a class that is not in this jar.
      return Class.forName(name, true, loader);
    } catch (ClassNotFoundException | LinkageError e) {
      throw new ConfigException(
          key + ": class " + name + " not found (is its plugin on the worker's plugin.path?)");
    }
  }

  private static <T> T instantiate(String key, Class<?> cls, Class<T> type) {
    String name = cls.getName();
    if (!type.isAssignableFrom(cls)) {
      throw new ConfigException(key + ": " + name + " is not a " + type.getSimpleName());
    }
    try {
      return type.cast(cls.getDeclaredConstructor().newInstance());
    } catch (ReflectiveOperationException | RuntimeException e) {
      throw new ConfigException(key + ": cannot create " + name + ": " + e);
    }
  }
}
