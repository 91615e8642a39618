package org.orderedkafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

/** The settings check: the same rules and messages as Python's (ordered/settings.py). */
class SettingsTest {
  static Map<String, Object> base() {
    Map<String, Object> config = new HashMap<>();
    config.put("partitioner.class", OrderedPartitioner.class);
    config.put("interceptor.classes", List.of(OrderedProducerInterceptor.class.getName()));
    config.put("ordered.zookeeper.connect", "127.0.0.1:2181");
    return config;
  }

  static String refused(Map<String, Object> config, String self) {
    ConfigException exc = assertThrows(ConfigException.class, () -> OrderedSettings.parse(config, self));
    assertFalse(exc.getMessage().contains("\n"), "one line: " + exc.getMessage());
    return exc.getMessage();
  }

  static String refused(Map<String, Object> config) {
    return refused(config, OrderedSettings.PARTITIONER);
  }

  @Test
  void defaults() {
    OrderedSettings s = OrderedSettings.parse(base(), OrderedSettings.PARTITIONER);
    assertEquals("127.0.0.1:2181", s.zookeeperConnect);
    assertEquals("/ordered", s.root);
    assertEquals(10_000, s.sessionTimeoutMs);
    assertEquals("track", s.switchMode);
    assertEquals(120_000, s.deliveryTimeoutMs);
    assertEquals("anonymous", s.principal());
  }

  @Test
  void aConsumersSessionTimeoutDefaultsToEighteenSecondsAsInPython() {
    Map<String, Object> config = new HashMap<>();
    config.put("ordered.zookeeper.connect", "127.0.0.1:2181");
    assertEquals(18_000, OrderedSettings.parseConsumer(config).sessionTimeoutMs);
    config.put("ordered.zookeeper.session.timeout.ms", "12000");
    assertEquals(12_000, OrderedSettings.parseConsumer(config).sessionTimeoutMs);
  }

  @Test
  void aMissingZooKeeperAddressIsRefused() {
    Map<String, Object> config = base();
    config.remove("ordered.zookeeper.connect");
    assertEquals("ordered.zookeeper.connect is required (the layout store)", refused(config));
  }

  @Test
  void aMissingInterceptorIsRefused() {
    Map<String, Object> config = base();
    config.remove("interceptor.classes");
    assertTrue(refused(config).startsWith("interceptor.classes must include org.orderedkafka.OrderedProducerInterceptor"));
    config.put("interceptor.classes", "com.example.Other");
    assertTrue(refused(config).startsWith("interceptor.classes must include"));
    config.put("interceptor.classes", "com.example.Other, org.orderedkafka.OrderedProducerInterceptor");
    OrderedSettings.parse(config, OrderedSettings.PARTITIONER);
  }

  @Test
  void anInterceptorWithoutThePartitionerIsRefused() {
    Map<String, Object> config = base();
    config.remove("partitioner.class");
    assertTrue(refused(config, OrderedSettings.INTERCEPTOR).startsWith("partitioner.class must be org.orderedkafka.OrderedPartitioner"));
  }

  @Test
  void pythonsMessages() {
    Map<String, Object> config = base();
    config.put("ordered.zookeeper.root", "ordered");
    assertEquals("ordered.zookeeper.root: expected an absolute znode path like /ordered, got 'ordered'", refused(config));
    config = base();
    config.put("ordered.zookeeper.session.timeout.ms", "0");
    assertEquals("ordered.zookeeper.session.timeout.ms: must be >= 1, got 0", refused(config));
    config.put("ordered.zookeeper.session.timeout.ms", "ten");
    assertEquals("ordered.zookeeper.session.timeout.ms: expected an integer, got 'ten'", refused(config));
    config = base();
    config.put("ordered.switch.mode", "fast");
    assertEquals("ordered.switch.mode: expected one of track, pause, got 'fast'", refused(config));
    config = base();
    config.put("ordered.zookeeper.conect", "x");
    assertTrue(refused(config).startsWith("unknown setting(s) ordered.zookeeper.conect (known: ordered.epoch.header, "));
    config = base();
    config.put("ordered.zookeeper.connect", " ");
    assertEquals("ordered.zookeeper.connect: expected a non-empty string, got ' '", refused(config));
    config = base();
    config.put("enable.idempotence", "false");
    assertTrue(refused(config).startsWith("enable.idempotence=false is not allowed"));
    config = base();
    config.put("acks", "1");
    assertTrue(refused(config).startsWith("acks=1 is not allowed"));
    config = base();
    config.put("max.in.flight.requests.per.connection", 6);
    assertTrue(refused(config).startsWith("max.in.flight.requests.per.connection=6 is not allowed"));
    config = base();
    config.put("retries", "0");
    assertTrue(refused(config).startsWith("retries=0 is not allowed"));
    config = base();
    config.put("ordered.epoch.header", "true");
    assertTrue(refused(config).startsWith("ordered.epoch.header=true is not supported by the JVM plugins"));
    config.put("ordered.epoch.header", "maybe");
    assertEquals("ordered.epoch.header: expected a boolean (true or false), got 'maybe'", refused(config));
  }

  @Test
  void credentialsAreNeverShown() {
    Map<String, Object> config = base();
    config.put("ordered.zookeeper.auth", "digest:producer");
    String message = refused(config);
    assertEquals(
        "ordered.zookeeper.auth: expected digest:USER:PASSWORD with a user and a password (the value is not shown)",
        message);
    config.put("ordered.zookeeper.auth", "plain:producer:s3cret");
    message = refused(config);
    assertFalse(message.contains("s3cret"));
    assertTrue(message.contains("SCHEME one of digest, sasl"));
    config.put("ordered.zookeeper.auth", "digest:producer:s3cret");
    OrderedSettings s = OrderedSettings.parse(config, OrderedSettings.PARTITIONER);
    assertEquals("digest:producer", s.principal());
    assertFalse(s.toString().contains("s3cret"));
  }

  @Test
  void theDeliveryTimeoutIsDeclared() {
    Map<String, Object> config = base();
    config.put("delivery.timeout.ms", 45_000);
    config.put("client.id", "svc-1");
    OrderedSettings s = OrderedSettings.parse(config, OrderedSettings.PARTITIONER);
    assertEquals(45_000, s.deliveryTimeoutMs);
    assertEquals("svc-1", s.clientId);
  }

  @Test
  void zooKeeperTlsIsCheckedAtTheDoor() throws Exception {
    Map<String, Object> config = base();
    config.put(OrderedSettings.SSL_CA, "/nonexistent/ca.pem");
    assertEquals(
        "ordered.zookeeper.ssl.ca.location: no such file: '/nonexistent/ca.pem'", refused(config));
    java.io.File ca = java.io.File.createTempFile("ordered-ca", ".pem");
    ca.deleteOnExit();
    config.put(OrderedSettings.SSL_CA, ca.getPath());
    assertTrue(refused(config).startsWith(
        "ordered.zookeeper.ssl.ca.location set but ordered.zookeeper.ssl.client.enable is false"));
    config.put(OrderedSettings.SSL_ENABLE, "true");
    OrderedSettings s = OrderedSettings.parse(config, OrderedSettings.PARTITIONER);
    assertTrue(s.tls && s.tlsHostnameCheck);
    assertEquals(ca.getPath(), s.tlsCa);
    config.put(OrderedSettings.SSL_IDENTIFICATION, "");
    assertFalse(OrderedSettings.parse(config, OrderedSettings.PARTITIONER).tlsHostnameCheck);
    config.put(OrderedSettings.SSL_IDENTIFICATION, "http");
    assertTrue(refused(config).startsWith("ordered.zookeeper.ssl.endpoint.identification.algorithm: expected"));
    config.remove(OrderedSettings.SSL_IDENTIFICATION);
    config.put(OrderedSettings.SSL_CERTIFICATE, ca.getPath());
    assertEquals(
        "ordered.zookeeper.ssl.certificate.location and ordered.zookeeper.ssl.key.location go together: set both or neither",
        refused(config));
    config.put(OrderedSettings.SSL_KEY, ca.getPath());
    assertTrue(refused(config).contains("not supported by the JVM plugins yet"));
  }

  @Test
  void theTlsClientConfigUsesNettyAndThePemCa() throws Exception {
    java.io.File ca = java.io.File.createTempFile("ordered-ca", ".pem");
    ca.deleteOnExit();
    Map<String, Object> config = base();
    config.put(OrderedSettings.SSL_ENABLE, true);
    config.put(OrderedSettings.SSL_CA, ca.getPath());
    org.apache.zookeeper.client.ZKClientConfig zk =
        ZkSession.tlsConfig(OrderedSettings.parse(config, OrderedSettings.PARTITIONER));
    assertEquals("true", zk.getProperty("zookeeper.client.secure"));
    assertEquals(
        org.apache.zookeeper.ClientCnxnSocketNetty.class.getName(),
        zk.getProperty("zookeeper.clientCnxnSocket"));
    assertEquals(ca.getPath(), zk.getProperty("zookeeper.ssl.trustStore.location"));
    assertEquals("PEM", zk.getProperty("zookeeper.ssl.trustStore.type"));
    assertEquals("true", zk.getProperty("zookeeper.ssl.hostnameVerification"));
  }
}
