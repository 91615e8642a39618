package org.orderedkafka;

import static org.orderedkafka.VectorFile.asList;
import static org.orderedkafka.VectorFile.asMap;
import static org.orderedkafka.VectorFile.num;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The golden vectors Python writes ({@code vectors/linear_hash.json}, read relative to
 * {@code jvm/}; {@code $ORDERED_VECTORS} names another file): every hash, route, tree and
 * flow entry must come out the same on the JVM. The checker returns every difference, and
 * the tampering tests show it finds a changed route, hash, tree and flow entry.
 */
class GoldenVectorsTest {
  static Map<String, Object> vectors;

  @BeforeAll
  static void load() throws Exception {
    vectors = VectorFile.load();
  }

  static List<Long> nums(Object o) {
    List<Long> out = new ArrayList<>();
    for (Object x : asList(o)) {
      out.add(num(x));
    }
    return out;
  }

  static List<Long> longs(int[] values) {
    List<Long> out = new ArrayList<>();
    for (int v : values) {
      out.add((long) v);
    }
    return out;
  }

  static List<Long> longs(List<Integer> values) {
    List<Long> out = new ArrayList<>();
    for (int v : values) {
      out.add((long) v);
    }
    return out;
  }

  /** Every entry the JVM computes differently, described (empty: all agree). */
  static List<String> differences(Map<String, Object> v) {
    List<String> out = new ArrayList<>();
    HexFormat hex = HexFormat.of();
    int i = 0;
    for (Object o : asList(v.get("hashes"))) {
      Map<String, Object> e = asMap(o);
      byte[] key = hex.parseHex((String) e.get("key"));
      Object text = e.get("text");
      if (text != null && !new String(key, StandardCharsets.UTF_8).equals(text)) {
        out.add("hashes[" + i + "]: text is not the key's UTF-8");
      }
      check(out, "hashes[" + i + "].murmur3", num(e.get("murmur3")), Hashing.murmur3(key));
      check(out, "hashes[" + i + "].murmur2", num(e.get("murmur2")), Hashing.hash(key, "murmur2"));
      check(out, "hashes[" + i + "].murmur2_signed", num(e.get("murmur2_signed")), Hashing.murmur2(key));
      check(out, "hashes[" + i + "].crc32", num(e.get("crc32")), Hashing.hash(key, "crc32"));
      i++;
    }
    i = 0;
    for (Object o : asList(v.get("routes"))) {
      Map<String, Object> e = asMap(o);
      byte[] key = hex.parseHex((String) e.get("key"));
      String algorithm = (String) e.get("algorithm");
      Layout layout = new Layout((int) num(e.get("initial")), (int) num(e.get("active")), 0);
      check(out, "routes[" + i + "].hash", num(e.get("hash")), Hashing.hash(key, algorithm));
      check(out, "routes[" + i + "].partition", num(e.get("partition")), layout.partitionFor(key, algorithm));
      i++;
    }
    i = 0;
    for (Object o : asList(v.get("tree"))) {
      Map<String, Object> e = asMap(o);
      int n = (int) num(e.get("initial"));
      int u = (int) num(e.get("active"));
      int p = (int) num(e.get("partition"));
      Object parent = e.get("parent");
      check(out, "tree[" + i + "].parent", parent == null ? -1 : num(parent), Layout.parent(p, n));
      if (!nums(e.get("children")).equals(longs(Layout.children(p, n, u)))) {
        out.add("tree[" + i + "].children: vectors " + e.get("children") + ", JVM " + longs(Layout.children(p, n, u)));
      }
      check(out, "tree[" + i + "].route_of_partition", num(e.get("route_of_partition")), Layout.route(p, n, u));
      i++;
    }
    i = 0;
    for (Object o : asList(v.get("flows"))) {
      Map<String, Object> e = asMap(o);
      int n = (int) num(e.get("initial"));
      int a = (int) num(e.get("from"));
      int b = (int) num(e.get("to"));
      List<List<Long>> edges = new ArrayList<>();
      for (Object edge : asList(e.get("edges"))) {
        edges.add(nums(edge));
      }
      List<List<Long>> ours = new ArrayList<>();
      for (int[] edge : Flow.keyFlow(n, a, b)) {
        ours.add(longs(edge));
      }
      if (!edges.equals(ours)) {
        out.add("flows[" + i + "].edges: vectors " + edges + ", JVM " + ours);
      }
      for (Map.Entry<String, Object> s : asMap(e.get("sources")).entrySet()) {
        List<Long> jvm = longs(Flow.sources(Integer.parseInt(s.getKey()), n, a, b));
        if (!nums(s.getValue()).equals(jvm)) {
          out.add("flows[" + i + "].sources[" + s.getKey() + "]: vectors " + s.getValue() + ", JVM " + jvm);
        }
      }
      for (Map.Entry<String, Object> s : asMap(e.get("blockers")).entrySet()) {
        List<Long> jvm = longs(Flow.blockers(Integer.parseInt(s.getKey()), n, a, b));
        if (!nums(s.getValue()).equals(jvm)) {
          out.add("flows[" + i + "].blockers[" + s.getKey() + "]: vectors " + s.getValue() + ", JVM " + jvm);
        }
      }
      i++;
    }
    return out;
  }

  private static void check(List<String> out, String what, long expected, long actual) {
    if (expected != actual) {
      out.add(what + ": vectors " + expected + ", JVM " + actual);
    }
  }

  @Test
  void everyEntryAgrees() {
    assertEquals(1L, num(vectors.get("version")));
    assertTrue(asList(vectors.get("hashes")).size() >= 100, "too few hash vectors");
    assertTrue(asList(vectors.get("routes")).size() >= 100, "too few route vectors");
    assertFalse(asList(vectors.get("tree")).isEmpty(), "no tree vectors");
    assertFalse(asList(vectors.get("flows")).isEmpty(), "no flow vectors");
    List<String> diff = differences(vectors);
    assertEquals(List.of(), diff.size() > 20 ? diff.subList(0, 20) : diff);
  }

  @Test
  void theVectorsCoverWhatTheFormatAsks() {
    List<Integer> lengths = new ArrayList<>();
    boolean nonAscii = false;
    boolean invalidUtf8 = false;
    for (Object o : asList(vectors.get("hashes"))) {
      Map<String, Object> e = asMap(o);
      String key = (String) e.get("key");
      lengths.add(key.length() / 2);
      Object text = e.get("text");
      nonAscii |= text instanceof String && ((String) text).chars().anyMatch(c -> c > 127);
      invalidUtf8 |= text == null;
    }
    for (int n = 0; n <= 7; n++) {
      assertTrue(lengths.contains(n), "no key of " + n + " bytes");
    }
    assertTrue(lengths.stream().anyMatch(n -> n >= 65536), "no 64 KiB key");
    assertTrue(nonAscii, "no non-ASCII key");
    assertTrue(invalidUtf8, "no key that is not UTF-8");
    boolean deep = false;
    for (Object o : asList(vectors.get("routes"))) {
      deep |= num(asMap(o).get("active")) >= 1000;
    }
    assertTrue(deep, "no deep chain (active >= 1000)");
  }

  /** A copy of the vectors with one entry of {@code section} changed by {@code change}. */
  static Map<String, Object> tampered(String section, int index, String field, Object value) {
    Map<String, Object> copy = new LinkedHashMap<>(vectors);
    List<Object> entries = new ArrayList<>(asList(vectors.get(section)));
    Map<String, Object> entry = new LinkedHashMap<>(asMap(entries.get(index)));
    entry.put(field, value);
    entries.set(index, entry);
    copy.put(section, entries);
    return copy;
  }

  @Test
  void aChangedRouteIsFound() {
    Map<String, Object> first = asMap(asList(vectors.get("routes")).get(7));
    long active = num(first.get("active"));
    long other = (num(first.get("partition")) + 1) % Math.max(active, 2);
    List<String> diff = differences(tampered("routes", 7, "partition", other));
    assertEquals(1, diff.size(), diff.toString());
    assertTrue(diff.get(0).startsWith("routes[7].partition"), diff.get(0));
  }

  @Test
  void aChangedHashTreeOrFlowIsFound() {
    long m3 = num(asMap(asList(vectors.get("hashes")).get(3)).get("murmur3"));
    assertEquals(1, differences(tampered("hashes", 3, "murmur3", m3 ^ 1)).size());
    long route = num(asMap(asList(vectors.get("tree")).get(5)).get("route_of_partition"));
    assertEquals(1, differences(tampered("tree", 5, "route_of_partition", route + 1)).size());
    List<Object> flows = asList(vectors.get("flows"));
    int moving = 0;
    while (asList(asMap(flows.get(moving)).get("edges")).isEmpty()) {
      moving++; // the first flow whose count changes: its edges are not empty
    }
    assertEquals(1, differences(tampered("flows", moving, "edges", List.of())).size());
  }
}
