package org.orderedkafka.connect;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkTask;
import org.orderedkafka.OrderedSettings;

/**
 * A sink connector that wraps another one ({@code ordered.sink.connector.class}) so that its
 * tasks get each key's records in order across the expansions and shrinks of ordered topics.
 *
 * <p>Every setting but the {@code ordered.*} ones goes to the wrapped connector as it is; its
 * task settings go to {@link OrderedSinkTask} together with the {@code ordered.*} settings,
 * the wrapped task's class and the group whose committed offsets are the progress ({@code
 * connect-<name>}, or {@code consumer.override.group.id}). A misconfiguration is reported at
 * validation, one error naming the key.
 */
public class OrderedSinkConnector extends SinkConnector {
  /** The version reported to the worker. */
  static final String VERSION = "0.1.0";

  /**
   * This connector's own keys, for the worker's documentation and validation. None is
   * required here: {@link SinkSettings} reports a missing one, so a problem is one error.
   */
  private static final ConfigDef OWN =
      new ConfigDef()
          .define(
              SinkSettings.CONNECTOR_CLASS,
              ConfigDef.Type.STRING,
              null,
              ConfigDef.Importance.HIGH,
              "The sink connector to wrap, e.g. org.apache.kafka.connect.file.FileStreamSinkConnector.")
          .define(
              SinkSettings.ADMIN_PREFIX + "bootstrap.servers",
              ConfigDef.Type.STRING,
              null,
              ConfigDef.Importance.HIGH,
              "The Kafka cluster the sink reads, for the gates' admin client (default: "
                  + "consumer.override.bootstrap.servers). Other admin settings take the same prefix.")
          .define(
              OrderedSettings.CONNECT,
              ConfigDef.Type.STRING,
              null,
              ConfigDef.Importance.HIGH,
              "The ZooKeeper ensemble holding the layouts.");

  private SinkSettings settings;
  private Map<String, String> props;
  private SinkConnector delegate;

  @Override
  public String version() {
    return VERSION;
  }

  @Override
  public void start(Map<String, String> props) {
    try {
      settings = SinkSettings.parse(props);
    } catch (ConfigException e) {
      throw new ConnectException(e.getMessage(), e);
    }
    this.props = new HashMap<>(props);
    delegate = settings.newConnector();
    DelegateLoader.run(
        delegate,
        () -> {
          delegate.initialize(context());
          delegate.start(settings.delegateConfig);
        });
  }

  @Override
  public Class<? extends Task> taskClass() {
    return OrderedSinkTask.class;
  }

  @Override
  public List<Map<String, String>> taskConfigs(int maxTasks) {
    Class<? extends Task> taskClass = DelegateLoader.call(delegate, delegate::taskClass);
    List<Map<String, String>> theirs = DelegateLoader.call(delegate, () -> delegate.taskConfigs(maxTasks));
    if (!SinkTask.class.isAssignableFrom(taskClass)) {
      throw new ConnectException(settings.connectorClass + "'s task class " + taskClass.getName() + " is not a SinkTask");
    }
    List<Map<String, String>> out = new ArrayList<>();
    for (Map<String, String> c : theirs) {
      Map<String, String> task = new HashMap<>(c);
      // The worker subscribes a sink task to the topics of its task settings.
      for (String key : List.of(SinkTask.TOPICS_CONFIG, SinkTask.TOPICS_REGEX_CONFIG, "name")) {
        if (!task.containsKey(key) && props.containsKey(key)) {
          task.put(key, props.get(key));
        }
      }
      for (Map.Entry<String, String> e : props.entrySet()) {
        if (e.getKey().startsWith("ordered.")) {
          task.put(e.getKey(), e.getValue());
        }
      }
      task.put(SinkSettings.TASK_CLASS, taskClass.getName());
      task.put(SinkSettings.GROUP, settings.group);
      out.add(task);
    }
    return out;
  }

  @Override
  public void stop() {
    if (delegate != null) {
      DelegateLoader.run(delegate, delegate::stop);
    }
  }

  @Override
  public ConfigDef config() {
    ConfigDef def = new ConfigDef(OWN);
    if (delegate != null) {
      SinkConnector wrapped = delegate;
      ConfigDef theirs = DelegateLoader.call(wrapped, wrapped::config);
      if (theirs != null) {
        for (ConfigDef.ConfigKey key : theirs.configKeys().values()) {
          if (!def.configKeys().containsKey(key.name)) {
            def.define(key);
          }
        }
      }
    }
    return def;
  }

  /**
   * The wrapped connector's validation of its settings, after this connector's own: a problem
   * with the {@code ordered.*} settings is one error on the key it names. Every key of {@link
   * #config()} gets a value (the worker's report expects one for each).
   */
  @Override
  public Config validate(Map<String, String> connectorConfigs) {
    SinkSettings checked = null;
    ConfigException problem = null;
    try {
      checked = SinkSettings.parse(connectorConfigs);
      delegate = checked.newConnector();
    } catch (ConfigException e) {
      problem = e;
    }
    ConfigDef def = config();
    String bad = problem == null ? null : keyOf(problem.getMessage());
    if (bad != null && !def.configKeys().containsKey(bad)) {
      def.define(bad, ConfigDef.Type.STRING, null, ConfigDef.Importance.LOW, "");
    }
    Map<String, ConfigValue> values = new LinkedHashMap<>();
    for (ConfigValue v : def.validateAll(connectorConfigs).values()) {
      values.put(v.name(), v);
    }
    if (problem != null) {
      values.get(bad).addErrorMessage(problem.getMessage());
    } else {
      SinkConnector wrapped = delegate;
      Map<String, String> given = checked.delegateConfig;
      Config theirs = DelegateLoader.call(wrapped, () -> wrapped.validate(given));
      if (theirs != null) {
        for (ConfigValue v : theirs.configValues()) {
          values.put(v.name(), v);
        }
      }
    }
    return new Config(new ArrayList<>(values.values()));
  }

  /**
   * The key a message of {@link SinkSettings} names: its first dotted word ({@code
   * ordered.zookeeper.connect: ...}, {@code unknown setting(s) ordered.x, ...}), {@code name}
   * for the connector's name, else the class key.
   */
  static String keyOf(String message) {
    if (message == null) {
      return SinkSettings.CONNECTOR_CLASS;
    }
    for (String word : message.split("[ :=,()]+")) {
      if (word.matches("[a-z0-9_-]+(\\.[a-z0-9_-]+)+")) {
        return word;
      }
    }
    return message.startsWith("name ") ? "name" : SinkSettings.CONNECTOR_CLASS;
  }
}
