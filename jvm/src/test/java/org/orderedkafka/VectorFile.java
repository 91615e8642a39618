package org.orderedkafka;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * The committed golden vectors ({@code vectors/linear_hash.json}, read relative to {@code jvm/};
 * {@code ORDERED_VECTORS} names another file) and the casts their JSON needs, for every Java
 * test that runs them.
 */
public final class VectorFile {
  private VectorFile() {}

  /** The vectors, parsed. */
  public static Map<String, Object> load() throws Exception {
    String override = System.getenv("ORDERED_VECTORS");
    Path path =
        Path.of(override != null && !override.isEmpty() ? override : "../vectors/linear_hash.json");
    return asMap(Json.parse(new String(Files.readAllBytes(path), StandardCharsets.UTF_8)));
  }

  @SuppressWarnings("unchecked")
  public static Map<String, Object> asMap(Object o) {
    return (Map<String, Object>) o;
  }

  @SuppressWarnings("unchecked")
  public static List<Object> asList(Object o) {
    return (List<Object>) o;
  }

  public static long num(Object o) {
    return ((Number) o).longValue();
  }
}
