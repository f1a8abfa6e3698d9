package org.tessera;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One conversation's KV cache over a {@link Model}, and the tokens it
 * holds. Use a session from one thread at a time; {@link #cancel()} may be
 * called from any thread and stops the generation in progress at the next
 * token, and {@link #close()} waits for it. Close sessions before their
 * model.
 *
 * <p>Threads: a session made with nThreads 0 (the default) takes, when
 * each generation starts, {@code availableProcessors()} divided by the
 * generations then running in this process (itself included), at least 1:
 * one session uses every core, two generating at once use half each, and
 * so on. A fixed count ({@link Model#newSession(int, int)}, {@link
 * #setThreads}) is kept as given.
 */
public final class Session implements AutoCloseable {
    /** Receives the text of each token as it is generated; false stops. */
    public interface TokenCallback {
        boolean onToken(@NonNull String piece);
    }

    /**
     * Sampling, length and stop settings (llama.cpp's defaults; temperature
     * 0 is greedy). The chain, llama.cpp's default order: penalties, DRY,
     * top-n-sigma, top-k, typical, top-p, min-p, XTC, temperature (or
     * mirostat alone); {@link #samplers} changes it.
     */
    public static final class Options {
        int maxTokens = 256, topK = 40, penaltyLastN = 64;
        float temperature = 0.8f, topP = 0.95f, minP = 0.05f, typicalP = 1.0f;
        float repeatPenalty = 1.0f, frequencyPenalty = 0.0f, presencePenalty = 0.0f;
        float dryMultiplier = 0.0f, dryBase = 1.75f, xtcProbability = 0.0f, xtcThreshold = 0.1f, topNSigma = -1.0f;
        float dynatempRange = 0.0f, dynatempExponent = 1.0f, mirostatTau = 5.0f, mirostatEta = 0.1f;
        int dryAllowedLength = 2, dryPenaltyLastN = 64, mirostat = 0;
        String[] dryBreakers, samplers; /* null: llama.cpp's defaults */

        /** DRY: multiplier (0: off), base, allowed repeat length, tokens looked back (-1: the context). */
        public @NonNull Options dry(float multiplier, float base, int allowedLength, int penaltyLastN) {
            dryMultiplier = multiplier; dryBase = base; dryAllowedLength = allowedLength; dryPenaltyLastN = penaltyLastN;
            return this;
        }
        /** DRY's sequence breakers (default llama.cpp's "\n", ":", "\"", "*"); none: no breakers. */
        public @NonNull Options drySequenceBreakers(@NonNull String... breakers) {
            String[] copy = Objects.requireNonNull(breakers, "breakers").clone();
            for (int i = 0; i < copy.length; i++)
                if (copy[i] == null || copy[i].isEmpty()) throw new IllegalArgumentException("breakers[" + i + "] is empty");
            dryBreakers = copy;
            return this;
        }
        /** XTC: chance (0: off) and threshold (above 0.5: off). */
        public @NonNull Options xtc(float probability, float threshold) { xtcProbability = probability; xtcThreshold = threshold; return this; }
        /** Top-n-sigma (<= 0: off). */
        public @NonNull Options topNSigma(float n) { topNSigma = n; return this; }
        /** Dynamic temperature: range (0: off) and exponent. */
        public @NonNull Options dynatemp(float range, float exponent) { dynatempRange = range; dynatempExponent = exponent; return this; }
        /** Mirostat: 0 off, 1, 2; tau (target entropy), eta (learning rate). */
        public @NonNull Options mirostat(int mode, float tau, float eta) { mirostat = mode; mirostatTau = tau; mirostatEta = eta; return this; }
        /** The samplers in order, llama.cpp's names (penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature). */
        public @NonNull Options samplers(@NonNull String... names) {
            samplers = Objects.requireNonNull(names, "names").clone();
            for (int i = 0; i < samplers.length; i++) Objects.requireNonNull(samplers[i], "names[" + i + "]");
            return this;
        }
        long seed = 0xFFFFFFFFL; /* random */
        String grammar, jsonSchema, toolChoice = "auto";
        String[] stop = new String[0];

        public @NonNull Options maxTokens(int n) { maxTokens = n; return this; }
        public @NonNull Options temperature(float t) { temperature = t; return this; }
        public @NonNull Options topK(int k) { topK = k; return this; }
        public @NonNull Options topP(float p) { topP = p; return this; }
        public @NonNull Options minP(float p) { minP = p; return this; }
        /** Locally typical sampling; 1: off. */
        public @NonNull Options typicalP(float p) { typicalP = p; return this; }
        /** The repetition penalty (1: off) over the last lastN tokens (0: penalties off). */
        public @NonNull Options repeatPenalty(float r, int lastN) { repeatPenalty = r; penaltyLastN = lastN; return this; }
        /** The repetition penalty (1: off): a logit over the last penaltyLastN tokens is divided by it when positive, multiplied when negative. */
        public @NonNull Options repeatPenalty(float r) { repeatPenalty = r; return this; }
        /** Minus f times a token's count in the last penaltyLastN tokens (0: off). */
        public @NonNull Options frequencyPenalty(float f) { frequencyPenalty = f; return this; }
        /** Minus p for a token found in the last penaltyLastN tokens (0: off). */
        public @NonNull Options presencePenalty(float p) { presencePenalty = p; return this; }
        /** How many of the last tokens the three penalties look at (default 64; 0: none, penalties off). */
        public @NonNull Options penaltyLastN(int n) { penaltyLastN = n; return this; }
        public @NonNull Options seed(int s) { seed = s & 0xFFFFFFFFL; return this; }
        /** A GBNF grammar the output must follow; null: none. */
        public @NonNull Options grammar(@Nullable String gbnf) { grammar = gbnf; return this; }
        /** A JSON Schema (as JSON text) the output must follow; null: none. */
        public @NonNull Options jsonSchema(@Nullable String schema) { jsonSchema = schema; return this; }
        /**
         * Texts that end the generation: the output stops before the first
         * one found (it is neither returned nor streamed; text that may
         * begin one is streamed only once it cannot). None by default.
         */
        public @NonNull Options stop(@NonNull String... stops) {
            Objects.requireNonNull(stops, "stops");
            String[] copy = stops.clone();
            for (int i = 0; i < copy.length; i++) {
                Objects.requireNonNull(copy[i], "stops[" + i + "]");
                if (copy[i].isEmpty()) throw new IllegalArgumentException("stops[" + i + "] is empty");
            }
            stop = copy;
            return this;
        }
        /**
         * With tools in {@link Session#chat}: "auto" (the default: the model
         * decides), "none" (tools not offered), "required" (it must call
         * one: its output is constrained to a call), or a tool's name (it
         * must call that one).
         */
        public @NonNull Options toolChoice(@NonNull String choice) {
            toolChoice = Objects.requireNonNull(choice, "choice");
            return this;
        }

        /** A copy to change without changing this one. */
        public @NonNull Options copy() {
            Options o = new Options();
            o.maxTokens = maxTokens; o.topK = topK; o.penaltyLastN = penaltyLastN;
            o.temperature = temperature; o.topP = topP; o.minP = minP; o.typicalP = typicalP;
            o.repeatPenalty = repeatPenalty; o.frequencyPenalty = frequencyPenalty; o.presencePenalty = presencePenalty;
            o.seed = seed; o.grammar = grammar; o.jsonSchema = jsonSchema; o.toolChoice = toolChoice; o.stop = stop;
            o.dryMultiplier = dryMultiplier; o.dryBase = dryBase; o.dryAllowedLength = dryAllowedLength;
            o.dryPenaltyLastN = dryPenaltyLastN; o.dryBreakers = dryBreakers; o.xtcProbability = xtcProbability;
            o.xtcThreshold = xtcThreshold; o.topNSigma = topNSigma; o.dynatempRange = dynatempRange;
            o.dynatempExponent = dynatempExponent; o.mirostat = mirostat; o.mirostatTau = mirostatTau;
            o.mirostatEta = mirostatEta; o.samplers = samplers;
            return o;
        }
    }

    private static final AtomicInteger RUNNING = new AtomicInteger();

    private final Model model;
    private volatile long handle;
    private final int fixedThreads; /* 0: automatic */
    private int threads;            /* the count set in the context; 0: not set by us */
    private final Object cancelLock = new Object(); /* cancel() against close(), never held by run() */

    Session(Model model, int nCtx, int nThreads) {
        long m = model.retain();
        try {
            this.handle = nativeNew(m, nCtx, nThreads);
        } catch (RuntimeException e) {
            model.release();
            throw e;
        }
        this.model = model;
        this.fixedThreads = nThreads;
        this.threads = nThreads;
    }

    private long handle() {
        long h = handle;
        if (h == 0) throw new IllegalStateException("Session is closed");
        return h;
    }

    /** The context's size in tokens. */
    public synchronized int nCtx() { return nativeNCtx(handle()); }

    /** The tokens the session holds: the last prompt and what was generated after it (or what loadState gave). */
    public synchronized @NonNull int[] tokens() { return nativeTokens(handle()); }

    /**
     * CPU threads for the next generations; 0: automatic (see the class
     * comment).
     */
    public synchronized void setThreads(int nThreads) {
        if (nThreads < 0) throw new IllegalArgumentException("nThreads is negative: " + nThreads);
        nativeSetThreads(handle(), nThreads);
        threads = nThreads;
    }

    /**
     * Continue prompt (BOS added as the vocabulary asks, special-token texts
     * read as such) from an empty cache; returns the generated text (also
     * given piece by piece to callback).
     */
    public @NonNull String generate(@NonNull String prompt, @Nullable Options options, @Nullable TokenCallback callback) {
        Objects.requireNonNull(prompt, "prompt");
        return run(model.tokenize(prompt, true, true), false, options, callback, null);
    }

    /**
     * Continue prompt showing images, from an empty cache, for a model
     * loaded with a projector ({@link Model.Options#mmproj}): each image
     * goes where the prompt has a {@link ChatMessage#MEDIA_MARKER}
     * ({@code <__media__>}), or all of them before the text when it has
     * none. Greedy text is {@code tessera run --mmproj ... --image ...}'s.
     * An image without a projector is an IllegalArgumentException naming
     * it; an image the engine cannot decode a {@link TesseraException}
     * naming it ("image 0" or its file).
     */
    public @NonNull String generate(@NonNull String prompt, @NonNull List<Image> images, @Nullable Options options,
                                    @Nullable TokenCallback callback) {
        Objects.requireNonNull(prompt, "prompt");
        Objects.requireNonNull(images, "images");
        for (int i = 0; i < images.size(); i++) Objects.requireNonNull(images.get(i), "images[" + i + "]");
        if (images.isEmpty()) return generate(prompt, options, callback);
        long proj = model.projector("images[0]");
        String text = prompt;
        if (ChatMessage.markers(prompt) == 0) {
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < images.size(); i++) b.append(ChatMessage.MEDIA_MARKER);
            text = b.append(prompt).toString();
        }
        return run(null, true, options, callback, new Media(proj, text, true, images));
    }

    /** Continue the tokens prompt from an empty cache. */
    public @NonNull String generate(@NonNull int[] prompt, @Nullable Options options, @Nullable TokenCallback callback) {
        Objects.requireNonNull(prompt, "prompt");
        return run(prompt.clone(), false, options, callback, null);
    }

    /**
     * Go on from the tokens the session holds (after a generation that
     * stopped, or after {@link #loadState}): greedy output continues as the
     * uninterrupted generation would have. The penalties see the held
     * tokens; a grammar starts after the last prompt (after loadState: at
     * the end of the loaded tokens); a random draw restarts from its seed.
     */
    public @NonNull String continueGenerating(@Nullable Options options, @Nullable TokenCallback callback) {
        return run(null, true, options, callback, null);
    }

    /**
     * Answer a conversation through the model's chat template; returns the
     * assistant's reply.
     */
    public @NonNull ChatMessage chat(@NonNull List<ChatMessage> messages, @Nullable Options options,
                                     @Nullable TokenCallback callback) {
        return chat(messages, null, options, callback);
    }

    /**
     * Answer a conversation, offering tools (null or empty: none); returns
     * the assistant's reply with the tool calls it made parsed ({@link
     * ChatMessage#toolCalls()}). Options.toolChoice("required") or a tool's
     * name makes it call one (its output is constrained to a JSON call);
     * that cannot be combined with a grammar or JSON schema.
     */
    public @NonNull ChatMessage chat(@NonNull List<ChatMessage> messages, @Nullable List<Tool> tools,
                                     @Nullable Options options, @Nullable TokenCallback callback) {
        Objects.requireNonNull(messages, "messages");
        Options o = options == null ? new Options() : options;
        List<Tool> offered = tools == null || o.toolChoice.equals("none") ? Collections.emptyList() : tools;
        for (int i = 0; i < offered.size(); i++) Objects.requireNonNull(offered.get(i), "tools[" + i + "]");
        if (!offered.isEmpty() && !o.toolChoice.equals("auto")) {
            if (o.grammar != null || o.jsonSchema != null)
                throw new IllegalArgumentException("toolChoice '" + o.toolChoice + "' forces a tool call; it cannot be combined with a grammar or JSON schema");
            List<String> schemas = new ArrayList<>();
            for (Tool t : offered)
                if (o.toolChoice.equals("required") || o.toolChoice.equals(t.name())) schemas.add(t.callSchema());
            if (schemas.isEmpty())
                throw new IllegalArgumentException("toolChoice names '" + o.toolChoice + "', which is not among the tools");
            o = o.copy().jsonSchema(schemas.size() == 1 ? schemas.get(0) : "{\"anyOf\":[" + String.join(",", schemas) + "]}");
        }
        List<Image> images = new ArrayList<>();
        String first = null;
        for (int i = 0; i < messages.size(); i++) {
            ChatMessage m = Objects.requireNonNull(messages.get(i), "messages[" + i + "]");
            if (first == null && !m.images().isEmpty()) first = "messages[" + i + "].images[0]";
            images.addAll(m.images());
        }
        String text;
        if (images.isEmpty()) {
            text = run(model.chatTokens(messages, offered), false, o, callback, null);
        } else {
            long proj = model.projector(first);
            Object[] prompt = model.chatPromptBos(messages, offered);
            text = run(null, true, o, callback, new Media(proj, (String) prompt[0], !(Boolean) prompt[1], images));
        }
        return offered.isEmpty() ? new ChatMessage("assistant", text) : model.parseReply(text, offered);
    }

    /* the adapters in use and their scales, in the order set */
    private final java.util.LinkedHashMap<LoraAdapter, Float> loras = new java.util.LinkedHashMap<>();

    /**
     * Use a LoRA adapter of this session's model ({@link Model#loadLora})
     * with scale in the next generations (--lora-scaled FILE SCALE; 1 is
     * --lora, 0 as if not set), or change its scale. The KV cache was
     * computed with the set before: it is dropped, and {@link
     * #continueGenerating} decodes the held tokens again (a prompt with
     * images cannot be: start it again).
     */
    public synchronized void setLora(@NonNull LoraAdapter adapter, float scale) {
        Objects.requireNonNull(adapter, "adapter");
        if (adapter.model() != model)
            throw new IllegalArgumentException("the adapter " + adapter.path() + " is of another model ("
                    + adapter.model().path() + "), not this session's (" + model.path() + ")");
        if (!Float.isFinite(scale)) throw new IllegalArgumentException("LoRA scale " + scale + " is not finite");
        java.util.LinkedHashMap<LoraAdapter, Float> next = new java.util.LinkedHashMap<>(loras);
        next.put(adapter, scale);
        applyLoras(next);
    }

    /** Stop using an adapter (nothing when it is not set); the KV cache is dropped as by setLora. */
    public synchronized void removeLora(@NonNull LoraAdapter adapter) {
        Objects.requireNonNull(adapter, "adapter");
        if (!loras.containsKey(adapter)) return;
        java.util.LinkedHashMap<LoraAdapter, Float> next = new java.util.LinkedHashMap<>(loras);
        next.remove(adapter);
        applyLoras(next);
    }

    /** Stop using every adapter. */
    public synchronized void clearLoras() {
        if (!loras.isEmpty()) applyLoras(new java.util.LinkedHashMap<>());
    }

    /** The adapters in use and their scales, in the order set (a copy). */
    public synchronized @NonNull java.util.Map<LoraAdapter, Float> loras() {
        return new java.util.LinkedHashMap<>(loras);
    }

    private void applyLoras(java.util.LinkedHashMap<LoraAdapter, Float> next) {
        long h = handle();
        long[] hs = new long[next.size()];
        float[] scales = new float[next.size()];
        int i = 0;
        for (java.util.Map.Entry<LoraAdapter, Float> e : next.entrySet()) {
            hs[i] = e.getKey().handle();
            scales[i++] = e.getValue();
        }
        nativeSetLoras(h, hs, scales);
        loras.clear();
        loras.putAll(next);
    }

    /** Stop the generation in progress (from any thread); it returns what it had. */
    public void cancel() {
        synchronized (cancelLock) { /* not the session's lock: run() holds that */
            if (handle != 0) nativeCancel(handle);
        }
    }

    /**
     * The session's state: its tokens, the KV cache and the last logits
     * (the engine's format, which names the model and the cache settings),
     * for {@link #loadState(byte[])} in a session of the same model and
     * cache settings.
     */
    public synchronized @NonNull byte[] saveState() { return nativeSaveState(handle()); }

    /** The state to a file (written beside it and renamed over it). */
    public synchronized void saveState(@NonNull Path path) {
        Objects.requireNonNull(path, "path");
        nativeSaveStateFile(handle(), path.toString().getBytes(StandardCharsets.UTF_8));
    }

    /** Replace the session's tokens and cache with a saved state; then {@link #continueGenerating} goes on from it. */
    public synchronized void loadState(@NonNull byte[] state) {
        Objects.requireNonNull(state, "state");
        nativeLoadState(handle(), state);
    }

    public synchronized void loadState(@NonNull Path path) {
        Objects.requireNonNull(path, "path");
        nativeLoadStateFile(handle(), path.toString().getBytes(StandardCharsets.UTF_8));
    }

    /** A prompt with images: decoded through the model's projector before the generation. */
    private static final class Media {
        final long projector;
        final byte[] text;
        final boolean addSpecial;
        final byte[][] data, paths;

        Media(long projector, String text, boolean addSpecial, List<Image> images) {
            this.projector = projector;
            this.text = utf8(text);
            this.addSpecial = addSpecial;
            data = new byte[images.size()][];
            paths = new byte[images.size()][];
            for (int i = 0; i < data.length; i++) {
                data[i] = images.get(i).data();
                paths[i] = utf8(images.get(i).path());
            }
        }
    }

    /*
     * synchronized with close(): a close() from another thread waits for the
     * generation (cancel() first). media: a prompt with images, decoded
     * first (then resume goes on from it).
     */
    private synchronized String run(int[] prompt, boolean resume, Options options, TokenCallback callback,
                                    Media media) {
        long h = handle();
        Options o = options == null ? new Options() : options;
        if (o.grammar != null && o.jsonSchema != null)
            throw new IllegalArgumentException("grammar and jsonSchema both set; give one");
        int running = RUNNING.incrementAndGet();
        try {
            if (fixedThreads == 0) {
                int want = Math.max(1, Runtime.getRuntime().availableProcessors() / running);
                if (want != threads) {
                    nativeSetThreads(h, want);
                    threads = want;
                }
            }
            Utf8Pieces pieces = new Utf8Pieces(callback, o.stop);
            int[] ints = {o.maxTokens, o.topK, o.penaltyLastN, (int) o.seed, o.dryAllowedLength, o.dryPenaltyLastN,
                          o.mirostat};
            float[] floats = {o.temperature, o.topP, o.minP, o.typicalP, o.repeatPenalty, o.frequencyPenalty,
                              o.presencePenalty, o.dryMultiplier, o.dryBase, o.xtcProbability, o.xtcThreshold,
                              o.topNSigma, o.dynatempRange, o.dynatempExponent, o.mirostatTau, o.mirostatEta};
            byte[] order = o.samplers == null ? null : utf8(String.join(";", o.samplers));
            byte[] breakers = null;
            if (o.dryBreakers != null) {
                StringBuilder b = new StringBuilder();
                for (String x : o.dryBreakers) b.append(x).append('\0');
                breakers = utf8(b.toString());
            }
            if (media != null)
                synchronized (model.projectorLock) {
                    nativeEvalMedia(h, media.projector, media.text, media.addSpecial, media.data, media.paths);
                }
            nativeGenerate(h, prompt, resume, ints, floats, utf8(o.grammar), utf8(o.jsonSchema), order, breakers, pieces);
            return pieces.finish();
        } finally {
            RUNNING.decrementAndGet();
        }
    }

    private static byte[] utf8(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public synchronized void close() {
        synchronized (cancelLock) {
            if (handle == 0) return;
            nativeFree(handle);
            handle = 0;
        }
        model.release();
    }

    /**
     * Token bytes from the native loop to text: a UTF-8 character split over
     * tokens is held until complete, and text that may begin a stop string
     * until it cannot.
     */
    static final class Utf8Pieces {
        private final TokenCallback callback;
        private final String[] stops;
        private final int maxStop;
        private final CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPLACE).onUnmappableCharacter(CodingErrorAction.REPLACE);
        private ByteBuffer pending = ByteBuffer.allocate(0);
        private final StringBuilder text = new StringBuilder();
        private int emitted;           /* text[0..emitted) went to the callback */
        private boolean stopped, done; /* the callback said stop; a stop string matched */

        Utf8Pieces(TokenCallback callback, String[] stops) {
            this.callback = callback;
            this.stops = stops;
            int m = 0;
            for (String s : stops) m = Math.max(m, s.length());
            maxStop = m;
        }

        /** Called by the native loop for each token; false stops it. */
        boolean onBytes(byte[] bytes) {
            if (done) return false;
            ByteBuffer in = ByteBuffer.allocate(pending.remaining() + bytes.length);
            in.put(pending).put(bytes).flip();
            CharBuffer out = CharBuffer.allocate(in.remaining() + 1);
            decoder.decode(in, out, false);
            pending = in.slice();
            out.flip();
            add(out.toString(), false);
            return !stopped && !done;
        }

        /** Append piece, cut at a stop string, and stream what is safe (all of it when last). */
        private void add(String piece, boolean last) {
            int from = Math.max(0, text.length() - maxStop + 1);
            text.append(piece);
            int cut = -1;
            for (String s : stops) {
                int at = text.indexOf(s, from);
                if (at >= 0 && (cut < 0 || at < cut)) cut = at;
            }
            int safe = text.length();
            if (cut >= 0) {
                text.setLength(cut);
                safe = cut;
                done = true;
            } else if (!last) {
                for (String s : stops) /* hold back a tail that begins a stop string */
                    for (int k = Math.min(s.length() - 1, text.length()); k > 0; k--)
                        if (text.length() - k < safe && s.startsWith(text.substring(text.length() - k))) {
                            safe = text.length() - k;
                            break;
                        }
            }
            if (safe > emitted) {
                String out = text.substring(emitted, safe);
                emitted = safe;
                if (callback != null && !stopped && !callback.onToken(out)) stopped = true;
            }
        }

        String finish() {
            CharBuffer out = CharBuffer.allocate(pending.remaining() * 2 + 2);
            decoder.decode(pending, out, true);
            decoder.flush(out);
            out.flip();
            if (!done) add(out.toString(), true);
            return text.toString();
        }
    }

    private static native long nativeNew(long model, int nCtx, int nThreads);
    private static native void nativeFree(long session);
    private static native void nativeCancel(long session);
    private static native void nativeSetThreads(long session, int nThreads);
    private static native int nativeNCtx(long session);
    private static native int[] nativeTokens(long session);
    private static native void nativeGenerate(long session, int[] prompt, boolean resume, int[] ints, float[] floats,
                                              byte[] grammar, byte[] jsonSchema, byte[] samplers, byte[] breakers,
                                              Utf8Pieces sink);
    private static native void nativeEvalMedia(long session, long projector, byte[] prompt, boolean addSpecial,
                                               byte[][] images, byte[][] paths);
    private static native void nativeSetLoras(long session, long[] loras, float[] scales);
    private static native byte[] nativeSaveState(long session);
    private static native void nativeSaveStateFile(long session, byte[] path);
    private static native void nativeLoadState(long session, byte[] state);
    private static native void nativeLoadStateFile(long session, byte[] path);
}
