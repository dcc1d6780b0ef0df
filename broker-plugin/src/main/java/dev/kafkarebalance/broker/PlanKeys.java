package dev.kafkarebalance.broker;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.InvalidKeyException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.function.Function;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The shared keys that authenticate plan records (docs/kip848.md, "Authenticated plans").
 *
 * <p>The operator signs each record, tombstones included, with HMAC-SHA256 and puts the result
 * in the record header {@value #HEADER} as {@code hmac-sha256:<hex>}. The signed bytes are
 * {@code "kafka-rebalance-plan" 0x00}, the key's UTF-8 length as a 4-byte big-endian number, the
 * key, then for a plan {@code 0x01} followed by the value, and for a tombstone {@code 0x00}, the
 * incarnation's UTF-8 length (4 bytes, big-endian), the incarnation and the epoch (8 bytes,
 * big-endian), which the tombstone carries in the headers {@value #INCARNATION_HEADER} and
 * {@value #EPOCH_HEADER}. Unambiguous, so no record can be re-cut into another, and a tombstone
 * retires one incarnation only: it cannot delete a later incarnation's plan.
 *
 * <p>The brokers read the keys from a file ({@value PluginConfig#KEYS_FILE}): one key per line,
 * blank lines and lines starting with {@code #} ignored, each at least {@value #MIN_KEY_LENGTH}
 * characters. A record signed by any key in the file is accepted, so a key is rotated by adding
 * the new key on the brokers, switching the operator to it, then removing the old one. The file
 * is read again when it changes (checked by the reader thread, at most once a second).
 */
final class PlanKeys {
    static final String HEADER = "kafka-rebalance-signature";
    static final String INCARNATION_HEADER = "kafka-rebalance-incarnation";
    static final String EPOCH_HEADER = "kafka-rebalance-epoch";
    static final String SCHEME = "hmac-sha256:";
    static final int MIN_KEY_LENGTH = 16;
    private static final byte[] DOMAIN = "kafka-rebalance-plan\0".getBytes(StandardCharsets.US_ASCII);

    private final Path file;
    private volatile List<byte[]> keys;
    private long modified;
    private long checkedAt;

    private PlanKeys(Path file, List<byte[]> keys, long modified) {
        this.file = file;
        this.keys = keys;
        this.modified = modified;
    }

    /** No keys configured: records are not authenticated (a warning at start-up says so). */
    static PlanKeys none() {
        return new PlanKeys(null, List.of(), 0);
    }

    /** The keys in `file`; an unreadable file or one without a usable key is a config error. */
    static PlanKeys fromFile(Path file) {
        try {
            return new PlanKeys(file, read(file), Files.getLastModifiedTime(file).toMillis());
        } catch (IOException e) {
            throw new IllegalArgumentException(PluginConfig.KEYS_FILE + ": cannot read " + file + ": " + e);
        }
    }

    boolean required() {
        return file != null;
    }

    int count() {
        return keys.size();
    }

    /** Reads the file again if it changed; a bad new file keeps the old keys (and says why). */
    String reloadIfChanged(long nowMs) {
        if (file == null || nowMs - checkedAt < 1_000) {
            return null;
        }
        checkedAt = nowMs;
        try {
            long stamp = Files.getLastModifiedTime(file).toMillis();
            if (stamp == modified) {
                return null;
            }
            keys = read(file);
            modified = stamp;
            return "re-read " + keys.size() + " plan keys from " + file;
        } catch (IOException | IllegalArgumentException e) {
            return "kept the previous plan keys: " + PlanRecords.oneLine(e);
        }
    }

    /** Null when the plan record carries a signature by one of the keys; else why not. */
    String verify(String key, byte[] value, byte[] header) {
        return verifyMessage(header, secret -> mac(secret, key, value));
    }

    /** Null when the tombstone of (key, incarnation, epoch) is signed by one of the keys. */
    String verifyTombstone(String key, String incarnation, long epoch, byte[] header) {
        return verifyMessage(header, secret -> tombstoneMac(secret, key, incarnation, epoch));
    }

    private String verifyMessage(byte[] header, Function<byte[], byte[]> signer) {
        if (header == null) {
            return "no " + HEADER + " header";
        }
        String text = new String(header, StandardCharsets.US_ASCII);
        if (!text.startsWith(SCHEME)) {
            return HEADER + " is not " + SCHEME + "<hex>";
        }
        byte[] given;
        try {
            given = HexFormat.of().parseHex(text.substring(SCHEME.length()));
        } catch (IllegalArgumentException e) {
            return HEADER + " is not " + SCHEME + "<hex>";
        }
        for (byte[] secret : keys) {
            if (MessageDigest.isEqual(signer.apply(secret), given)) {
                return null;
            }
        }
        return "the signature matches none of the " + keys.size() + " configured keys";
    }

    /** The signature of the plan record (key, value) under `secret`. */
    static byte[] mac(byte[] secret, String key, byte[] value) {
        Mac mac = keyed(secret, key);
        mac.update((byte) 1);
        mac.update(value);
        return mac.doFinal();
    }

    /** The signature of the tombstone of (key, incarnation, epoch) under `secret`. */
    static byte[] tombstoneMac(byte[] secret, String key, String incarnation, long epoch) {
        Mac mac = keyed(secret, key);
        byte[] incarnationBytes = incarnation.getBytes(StandardCharsets.UTF_8);
        mac.update((byte) 0);
        mac.update(ByteBuffer.allocate(4).putInt(incarnationBytes.length).array());
        mac.update(incarnationBytes);
        mac.update(ByteBuffer.allocate(8).putLong(epoch).array());
        return mac.doFinal();
    }

    /** An HMAC-SHA256 under `secret` that has taken the domain and the record key. */
    private static Mac keyed(byte[] secret, String key) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            byte[] keyBytes = key.getBytes(StandardCharsets.UTF_8);
            mac.update(DOMAIN);
            mac.update(ByteBuffer.allocate(4).putInt(keyBytes.length).array());
            mac.update(keyBytes);
            return mac;
        } catch (NoSuchAlgorithmException | InvalidKeyException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }

    private static List<byte[]> read(Path file) throws IOException {
        List<byte[]> keys = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            String key = line.strip();
            if (key.isEmpty() || key.startsWith("#")) {
                continue;
            }
            if (key.length() < MIN_KEY_LENGTH) {
                throw new IllegalArgumentException(PluginConfig.KEYS_FILE + ": a key in " + file
                    + " is shorter than " + MIN_KEY_LENGTH + " characters");
            }
            keys.add(key.getBytes(StandardCharsets.UTF_8));
        }
        if (keys.isEmpty()) {
            throw new IllegalArgumentException(PluginConfig.KEYS_FILE + ": " + file + " holds no key");
        }
        return List.copyOf(keys);
    }
}
