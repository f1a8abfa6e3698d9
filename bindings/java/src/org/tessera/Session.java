package org.tessera;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * One conversation's KV cache and sampler over a {@link Model}. Use a
 * session from one thread at a time; {@link #cancel()} may be called from
 * any thread and stops the generation in progress at the next token, and
 * {@link #close()} waits for it. Close sessions before their model.
 */
public final class Session implements AutoCloseable {
    /** Receives the text of each token as it is generated; false stops. */
    public interface TokenCallback {
        boolean onToken(String piece);
    }

    /** Sampling and length settings (llama.cpp's defaults; temperature 0 is greedy). */
    public static final class Options {
        int maxTokens = 256, topK = 40, repeatLastN = 64;
        float temperature = 0.8f, topP = 0.95f, minP = 0.05f, repeatPenalty = 1.0f;
        long seed = 0xFFFFFFFFL; /* random */
        String grammar, jsonSchema;

        public Options maxTokens(int n) { maxTokens = n; return this; }
        public Options temperature(float t) { temperature = t; return this; }
        public Options topK(int k) { topK = k; return this; }
        public Options topP(float p) { topP = p; return this; }
        public Options minP(float p) { minP = p; return this; }
        public Options repeatPenalty(float r, int lastN) { repeatPenalty = r; repeatLastN = lastN; return this; }
        public Options seed(int s) { seed = s & 0xFFFFFFFFL; return this; }
        /** A GBNF grammar the output must follow. */
        public Options grammar(String gbnf) { grammar = gbnf; return this; }
        /** A JSON Schema (as JSON text) the output must follow. */
        public Options jsonSchema(String schema) { jsonSchema = schema; return this; }
    }

    private final Model model;
    private volatile long handle;
    private final Object cancelLock = new Object(); /* cancel() against close(), never held by run() */

    Session(Model model, int nCtx) {
        this.model = model;
        this.handle = nativeNew(model.handle(), nCtx);
    }

    /** Continue prompt; returns the generated text (also given piece by piece to callback, which may be null). */
    public String generate(String prompt, Options options, TokenCallback callback) {
        return run(model.tokenize(prompt, true, true), options, callback);
    }

    /**
     * Answer a conversation (roles "system", "user", "assistant") through the
     * model's chat template; returns the reply.
     */
    public String chat(String[] roles, String[] contents, Options options, TokenCallback callback) {
        return run(model.chatTokens(roles, contents), options, callback);
    }

    /** Stop the generation in progress (from any thread); it returns what it had. */
    public void cancel() {
        synchronized (cancelLock) { /* not the session's lock: run() holds that */
            if (handle != 0) nativeCancel(handle);
        }
    }

    /* synchronized with close(): a close() from another thread waits for the generation (cancel() first). */
    private synchronized String run(int[] prompt, Options o, TokenCallback callback) {
        if (handle == 0) throw new IllegalStateException("Session is closed");
        if (o == null) o = new Options();
        Utf8Pieces pieces = new Utf8Pieces(callback);
        nativeGenerate(handle, prompt, o.maxTokens, o.temperature, o.topK, o.topP, o.minP, o.repeatPenalty,
                       o.repeatLastN, (int) o.seed, o.grammar, o.jsonSchema, pieces);
        return pieces.finish();
    }

    @Override
    public synchronized void close() {
        synchronized (cancelLock) {
            if (handle != 0) nativeFree(handle);
            handle = 0;
        }
    }

    /** Token bytes from the native loop to text: a UTF-8 character split over tokens is held until complete. */
    static final class Utf8Pieces {
        private final TokenCallback callback;
        private final CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPLACE).onUnmappableCharacter(CodingErrorAction.REPLACE);
        private ByteBuffer pending = ByteBuffer.allocate(0);
        private final StringBuilder text = new StringBuilder();
        private boolean stopped;

        Utf8Pieces(TokenCallback callback) { this.callback = callback; }

        /** Called by the native loop for each token; false stops it. */
        boolean onBytes(byte[] bytes) {
            ByteBuffer in = ByteBuffer.allocate(pending.remaining() + bytes.length);
            in.put(pending).put(bytes).flip();
            CharBuffer out = CharBuffer.allocate(in.remaining() + 1);
            decoder.decode(in, out, false);
            pending = in.slice();
            out.flip();
            String piece = out.toString();
            text.append(piece);
            if (callback != null && !piece.isEmpty() && !callback.onToken(piece)) stopped = true;
            return !stopped;
        }

        String finish() {
            CharBuffer out = CharBuffer.allocate(pending.remaining() * 2 + 2);
            decoder.decode(pending, out, true);
            decoder.flush(out);
            out.flip();
            String tail = out.toString();
            text.append(tail);
            if (callback != null && !tail.isEmpty() && !stopped) callback.onToken(tail);
            return text.toString();
        }
    }

    private static native long nativeNew(long model, int nCtx);
    private static native void nativeFree(long session);
    private static native void nativeCancel(long session);
    private static native void nativeGenerate(long session, int[] prompt, int maxTokens, float temperature, int topK,
                                              float topP, float minP, float repeatPenalty, int repeatLastN, int seed,
                                              String grammar, String jsonSchema, Utf8Pieces sink);
}
