package dev.kafkarebalance.client;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;

/**
 * The JSON reading and writing both wire formats share. Reading is strict (one JSON value, nothing
 * after it), as Python's {@code json.loads} is; writing is compact and ASCII-only, as Python's
 * {@code json.dumps(..., separators=(",", ":"))} is, so the bytes are the same on both ends.
 */
final class Json {
    private static final JsonMapper MAPPER = JsonMapper.builder()
        .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
        .enable(JsonWriteFeature.ESCAPE_NON_ASCII)
        .disable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
        .build();

    static {
        MAPPER.getFactory().setStreamReadConstraints(
            StreamReadConstraints.builder().maxNestingDepth(64).build());
    }

    private Json() {
    }

    /** The one JSON value of {@code text}; {@code WireException("input", ...)} when it is not. */
    static JsonNode parse(String text, WireExceptionFactory error) throws WireException {
        if (text.isEmpty()) {
            throw error.make("input", "empty");
        }
        try {
            JsonNode node = MAPPER.readTree(text);
            if (node == null || node.isMissingNode()) {
                throw error.make("input", "empty");
            }
            return node;
        } catch (JsonProcessingException e) {
            throw error.make("input", "not JSON (" + e.getOriginalMessage() + ")");
        }
    }

    /** A writer for one compact JSON value. */
    interface Body {
        void write(JsonGenerator out) throws IOException;
    }

    static String write(Body body) {
        StringWriter text = new StringWriter();
        try (JsonGenerator out = MAPPER.getFactory().createGenerator(text)) {
            body.write(out);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return text.toString();
    }

    /** Makes the format's own exception type for a field and problem. */
    interface WireExceptionFactory {
        WireException make(String field, String problem);
    }
}
