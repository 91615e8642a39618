package org.orderedkafka;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The small JSON reader and writer the records need (no JSON library is shaded in).
 *
 * <p>Reading gives {@code Map<String,Object>} (insertion order), {@code List<Object>},
 * {@code String}, {@code Boolean}, {@code null}, and numbers as {@code Long} when integral
 * (else {@code BigInteger}) or {@code Double} for fractions and exponents. Writing sorts
 * object keys (as Python's {@code json.dumps(sort_keys=True)}) with no spaces.
 */
public final class Json {
  private final String text;
  private int at;

  private Json(String text) {
    this.text = text;
  }

  /** Parse one JSON value. @throws IllegalArgumentException malformed JSON */
  public static Object parse(String text) {
    Json p = new Json(text);
    p.space();
    Object value = p.value();
    p.space();
    if (p.at != text.length()) {
      throw p.error("trailing data");
    }
    return value;
  }

  private IllegalArgumentException error(String what) {
    return new IllegalArgumentException("malformed JSON at offset " + at + ": " + what);
  }

  private void space() {
    while (at < text.length()) {
      char c = text.charAt(at);
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        at++;
      } else {
        break;
      }
    }
  }

  private Object value() {
    if (at >= text.length()) {
      throw error("unexpected end");
    }
    char c = text.charAt(at);
    switch (c) {
      case '{':
        return object();
      case '[':
        return array();
      case '"':
        return string();
      case 't':
        return literal("true", Boolean.TRUE);
      case 'f':
        return literal("false", Boolean.FALSE);
      case 'n':
        return literal("null", null);
      default:
        return number();
    }
  }

  private Object literal(String word, Object value) {
    if (!text.startsWith(word, at)) {
      throw error("unexpected character");
    }
    at += word.length();
    return value;
  }

  private Map<String, Object> object() {
    Map<String, Object> out = new LinkedHashMap<>();
    at++;
    space();
    if (peek() == '}') {
      at++;
      return out;
    }
    while (true) {
      space();
      if (peek() != '"') {
        throw error("expected a key");
      }
      String key = string();
      space();
      if (peek() != ':') {
        throw error("expected ':'");
      }
      at++;
      space();
      out.put(key, value());
      space();
      char c = peek();
      at++;
      if (c == '}') {
        return out;
      }
      if (c != ',') {
        throw error("expected ',' or '}'");
      }
    }
  }

  private List<Object> array() {
    List<Object> out = new ArrayList<>();
    at++;
    space();
    if (peek() == ']') {
      at++;
      return out;
    }
    while (true) {
      space();
      out.add(value());
      space();
      char c = peek();
      at++;
      if (c == ']') {
        return out;
      }
      if (c != ',') {
        throw error("expected ',' or ']'");
      }
    }
  }

  private char peek() {
    if (at >= text.length()) {
      throw error("unexpected end");
    }
    return text.charAt(at);
  }

  private String string() {
    at++;
    StringBuilder out = new StringBuilder();
    while (true) {
      char c = peek();
      at++;
      if (c == '"') {
        return out.toString();
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      char e = peek();
      at++;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.append(e);
          break;
        case 'b':
          out.append('\b');
          break;
        case 'f':
          out.append('\f');
          break;
        case 'n':
          out.append('\n');
          break;
        case 'r':
          out.append('\r');
          break;
        case 't':
          out.append('\t');
          break;
        case 'u':
          if (at + 4 > text.length()) {
            throw error("short \\u escape");
          }
          out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
          at += 4;
          break;
        default:
          throw error("bad escape");
      }
    }
  }

  private Object number() {
    int start = at;
    boolean fraction = false;
    while (at < text.length()) {
      char c = text.charAt(at);
      if ((c >= '0' && c <= '9') || c == '-' || c == '+') {
        at++;
      } else if (c == '.' || c == 'e' || c == 'E') {
        fraction = true;
        at++;
      } else {
        break;
      }
    }
    String s = text.substring(start, at);
    if (s.isEmpty()) {
      throw error("unexpected character");
    }
    try {
      if (fraction) {
        return Double.parseDouble(s);
      }
      BigInteger big = new BigInteger(s);
      return big.bitLength() < 64 ? (Object) big.longValue() : big;
    } catch (NumberFormatException exc) {
      throw error("bad number " + s);
    }
  }

  // --- writing ----------------------------------------------------------------------

  /** Compact JSON with sorted object keys (Python's {@code sort_keys=True, separators=(",", ":")}). */
  public static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(out, value);
    return out.toString();
  }

  @SuppressWarnings("unchecked")
  private static void write(StringBuilder out, Object value) {
    if (value == null) {
      out.append("null");
    } else if (value instanceof String) {
      quote(out, (String) value);
    } else if (value instanceof Boolean) {
      out.append(((Boolean) value) ? "true" : "false");
    } else if (value instanceof Double || value instanceof Float) {
      double d = ((Number) value).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        throw new IllegalArgumentException("not a JSON number: " + d);
      }
      // Plain decimal digits (Double.toString would write 1.7E9 for a unix time).
      String plain = BigDecimal.valueOf(d).toPlainString();
      out.append(plain);
      if (plain.indexOf('.') < 0) {
        out.append(".0");
      }
    } else if (value instanceof Number) {
      out.append(value.toString());
    } else if (value instanceof Map) {
      Map<String, Object> sorted = new TreeMap<>((Map<String, Object>) value);
      out.append('{');
      boolean first = true;
      for (Map.Entry<String, Object> e : sorted.entrySet()) {
        if (!first) {
          out.append(',');
        }
        first = false;
        quote(out, e.getKey());
        out.append(':');
        write(out, e.getValue());
      }
      out.append('}');
    } else if (value instanceof List) {
      out.append('[');
      boolean first = true;
      for (Object item : (List<Object>) value) {
        if (!first) {
          out.append(',');
        }
        first = false;
        write(out, item);
      }
      out.append(']');
    } else {
      throw new IllegalArgumentException("cannot write " + value.getClass().getName() + " as JSON");
    }
  }

  private static void quote(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        case '\b':
          out.append("\\b");
          break;
        case '\f':
          out.append("\\f");
          break;
        default:
          if (c < 0x20 || c > 0x7e) {
            // Python's json.dumps escapes every non-ASCII character (ensure_ascii).
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
      }
    }
    out.append('"');
  }
}
