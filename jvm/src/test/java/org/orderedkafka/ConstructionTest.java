package org.orderedkafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

/**
 * A misconfigured pair fails when the {@code KafkaProducer} is constructed (in
 * {@code configure()}), never at the first record; no server is needed for that.
 */
class ConstructionTest {
  static Properties config() {
    Properties p = new Properties();
    p.put("bootstrap.servers", "127.0.0.1:9");
    p.put("key.serializer", StringSerializer.class.getName());
    p.put("value.serializer", StringSerializer.class.getName());
    p.put("partitioner.class", OrderedPartitioner.class.getName());
    p.put("interceptor.classes", OrderedProducerInterceptor.class.getName());
    p.put("ordered.zookeeper.connect", "127.0.0.1:9");
    return p;
  }

  static ConfigException cause(Properties p) {
    KafkaException exc = assertThrows(KafkaException.class, () -> new KafkaProducer<String, String>(p).close());
    return assertInstanceOf(ConfigException.class, exc.getCause(), String.valueOf(exc.getCause()));
  }

  @Test
  void runsOnTheExpectedKafkaClients() {
    // The kafka-clients-3.9 execution swaps the jar: check it really did.
    String expected = System.getProperty("ordered.expect.kafka.version");
    if (expected != null) {
      assertEquals(expected, org.apache.kafka.common.utils.AppInfoParser.getVersion());
    }
  }

  @Test
  void aMissingInterceptor() {
    Properties p = config();
    p.remove("interceptor.classes");
    assertEquals(
        "interceptor.classes must include org.orderedkafka.OrderedProducerInterceptor: OrderedPartitioner"
            + " needs it to see acknowledgements (the layout barrier)",
        cause(p).getMessage());
  }

  @Test
  void aMissingPartitioner() {
    Properties p = config();
    p.remove("partitioner.class");
    assertEquals(
        "partitioner.class must be org.orderedkafka.OrderedPartitioner: OrderedProducerInterceptor works"
            + " only together with it",
        cause(p).getMessage());
  }

  @Test
  void aMissingZooKeeperAddress() {
    Properties p = config();
    p.remove("ordered.zookeeper.connect");
    assertEquals("ordered.zookeeper.connect is required (the layout store)", cause(p).getMessage());
  }

  @Test
  void anUnreachableZooKeeper() {
    // Nothing listens on port 9: the first producer of the JVM waits max(session, 10 s).
    Properties p = config();
    p.put("ordered.zookeeper.session.timeout.ms", "1000");
    long start = System.nanoTime();
    KafkaException exc = assertThrows(KafkaException.class, () -> new KafkaProducer<String, String>(p).close());
    assertEquals("ordered.zookeeper.connect: ZooKeeper could not be reached within 10 s", exc.getCause().getMessage());
    assertEquals(0, ZkSession.open(), "a session that never connected was kept");
    long seconds = (System.nanoTime() - start) / 1_000_000_000L;
    org.junit.jupiter.api.Assertions.assertTrue(seconds >= 9 && seconds < 30, seconds + " s");
  }

  @Test
  void aBadValue() {
    Properties p = config();
    p.put("ordered.zookeeper.session.timeout.ms", "-5");
    assertEquals("ordered.zookeeper.session.timeout.ms: must be >= 1, got -5", cause(p).getMessage());
  }
}
