package org.orderedkafka;

import java.util.zip.CRC32;

/**
 * The key hashes of {@code linear_hash.hashing}, byte-identical to the Python side (proven
 * by the golden vectors, {@code vectors/linear_hash.json}).
 *
 * <ul>
 *   <li>{@code murmur3} (default): MurmurHash3 x86 32-bit, seed 0, read unsigned, as
 *       {@code mmh3.hash(key, 0, signed=False)}.
 *   <li>{@code murmur2}: Kafka's {@code Utils.toPositive(Utils.murmur2(key))}.
 *   <li>{@code crc32}: the standard CRC-32 ({@code zlib.crc32}), librdkafka's
 *       {@code consistent} partitioner.
 * </ul>
 *
 * <p>Every hash is over the serialized key bytes, the bytes that reach Kafka (Python hashes
 * a {@code str} key as its UTF-8 encoding, which is what {@code StringSerializer} writes).
 * Results are non-negative {@code long}s in {@code [0, 2^32)}.
 */
public final class Hashing {
  /** The algorithm names a topic record may carry. */
  public static final String MURMUR3 = "murmur3";

  public static final String MURMUR2 = "murmur2";
  public static final String CRC32 = "crc32";

  private Hashing() {}

  /** The hash of {@code key} with {@code algorithm}, unsigned, as {@code linear_hash.hash_key}. */
  public static long hash(byte[] key, String algorithm) {
    switch (algorithm) {
      case MURMUR3:
        return murmur3(key);
      case MURMUR2:
        return murmur2(key) & 0x7fffffffL;
      case CRC32:
        return crc32(key);
      default:
        throw new IllegalArgumentException(
            "algorithm must be one of 'murmur3', 'murmur2', 'crc32'; got '" + algorithm + "'");
    }
  }

  /** MurmurHash3 x86 32-bit with seed 0, as an unsigned value. */
  @SuppressWarnings("fallthrough")
  public static long murmur3(byte[] data) {
    final int c1 = 0xcc9e2d51;
    final int c2 = 0x1b873593;
    int length = data.length;
    int h1 = 0;
    int blocks = length >>> 2;
    for (int i = 0; i < blocks; i++) {
      int at = i << 2;
      int k1 =
          (data[at] & 0xff)
              | ((data[at + 1] & 0xff) << 8)
              | ((data[at + 2] & 0xff) << 16)
              | ((data[at + 3] & 0xff) << 24);
      k1 *= c1;
      k1 = Integer.rotateLeft(k1, 15);
      k1 *= c2;
      h1 ^= k1;
      h1 = Integer.rotateLeft(h1, 13);
      h1 = h1 * 5 + 0xe6546b64;
    }
    int tail = blocks << 2;
    int k1 = 0;
    switch (length & 3) {
      case 3:
        k1 ^= (data[tail + 2] & 0xff) << 16;
        // fall through
      case 2:
        k1 ^= (data[tail + 1] & 0xff) << 8;
        // fall through
      case 1:
        k1 ^= data[tail] & 0xff;
        k1 *= c1;
        k1 = Integer.rotateLeft(k1, 15);
        k1 *= c2;
        h1 ^= k1;
        break;
      default:
        break;
    }
    h1 ^= length;
    h1 ^= h1 >>> 16;
    h1 *= 0x85ebca6b;
    h1 ^= h1 >>> 13;
    h1 *= 0xc2b2ae35;
    h1 ^= h1 >>> 16;
    return h1 & 0xffffffffL;
  }

  /** Kafka's {@code Utils.murmur2}: signed, seed 0x9747b28c (written out so no Kafka internals are needed). */
  @SuppressWarnings("fallthrough")
  public static int murmur2(byte[] data) {
    int length = data.length;
    final int seed = 0x9747b28c;
    final int m = 0x5bd1e995;
    final int r = 24;
    int h = seed ^ length;
    int length4 = length / 4;
    for (int i = 0; i < length4; i++) {
      final int i4 = i * 4;
      int k =
          (data[i4] & 0xff)
              + ((data[i4 + 1] & 0xff) << 8)
              + ((data[i4 + 2] & 0xff) << 16)
              + ((data[i4 + 3] & 0xff) << 24);
      k *= m;
      k ^= k >>> r;
      k *= m;
      h *= m;
      h ^= k;
    }
    switch (length % 4) {
      case 3:
        h ^= (data[(length & ~3) + 2] & 0xff) << 16;
        // fall through
      case 2:
        h ^= (data[(length & ~3) + 1] & 0xff) << 8;
        // fall through
      case 1:
        h ^= data[length & ~3] & 0xff;
        h *= m;
        break;
      default:
        break;
    }
    h ^= h >>> 13;
    h *= m;
    h ^= h >>> 15;
    return h;
  }

  /** CRC-32 (IEEE), unsigned, as {@code zlib.crc32}. */
  public static long crc32(byte[] data) {
    CRC32 crc = new CRC32();
    crc.update(data, 0, data.length);
    return crc.getValue();
  }
}
