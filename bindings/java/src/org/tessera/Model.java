package org.tessera;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;

/**
 * A loaded GGUF model. Thread-safe for reading; each thread generates
 * through its own {@link Session}. Close it (try-with-resources) after its
 * sessions and embedders: if some are still open, the weights are freed
 * when the last of them closes.
 */
public final class Model implements AutoCloseable {
    private long handle;
    private boolean closed;
    private int children; /* open sessions and embedders */
    private final String path;
    private long projector; /* the mmproj's tessera_mtmd; 0: none */
    /* held around a projector's use: its cache and encode buffer are not shared */
    final Object projectorLock = new Object();

    /** Load with the default devices and GPU layers ("auto"). */
    public Model(@NonNull String path) {
        this(path, null, -1);
    }

    /**
     * @param devices    "cpu-avx0", "vulkan0,cpu-neon0", ... or null for the default order
     * @param nGpuLayers layers on the first GPU; -1: as many as fit
     */
    public Model(@NonNull String path, @Nullable String devices, int nGpuLayers) {
        this(path, new Options().devices(devices).nGpuLayers(nGpuLayers));
    }

    /** Where a model's weights go: llama.cpp's --device, -ngl, -ot, --cpu-moe, --n-cpu-moe. */
    public static final class Options {
        String devices;
        int nGpuLayers = -1;
        final List<String> overrides = new ArrayList<>();
        int nCpuMoe;
        String mmproj;
        boolean mmprojOffload = true;

        /** "cpu-avx0", "vulkan0,cpu-avx0", ... or null for the default order. */
        public @NonNull Options devices(@Nullable String d) { devices = d; return this; }
        /** Layers on the first GPU; -1: as many as fit. */
        public @NonNull Options nGpuLayers(int n) { nGpuLayers = n; return this; }
        /**
         * "PATTERN=DEVICE" (llama.cpp's -ot; repeatable): the weights whose name the regular
         * expression PATTERN matches go to DEVICE, "CPU" (host memory) or the GPU; the first
         * matching rule wins, before nGpuLayers.
         */
        public @NonNull Options overrideTensor(@NonNull String rule) {
            overrides.add(Objects.requireNonNull(rule, "rule"));
            return this;
        }
        /** Every layer's experts (ffn_*_exps) stay in host memory, computed on the CPU (--cpu-moe). */
        public @NonNull Options cpuMoe() { nCpuMoe = Integer.MAX_VALUE; return this; }
        /** The experts of the first n layers stay in host memory (--n-cpu-moe). */
        public @NonNull Options nCpuMoe(int n) {
            if (n < 0) throw new IllegalArgumentException("nCpuMoe " + n + " is negative");
            nCpuMoe = n;
            return this;
        }

        /**
         * The model's multimodal projector (llama.cpp's mmproj GGUF, --mmproj), after which
         * {@link Session#chat} and {@link Session#generate(String, List, Session.Options,
         * Session.TokenCallback)} take {@link Image}s; null: none (text only).
         */
        public @NonNull Options mmproj(@Nullable String path) { mmproj = path; return this; }
        /** false: run the projector's encoder on the CPU alone (--no-mmproj-offload). */
        public @NonNull Options mmprojOffload(boolean on) { mmprojOffload = on; return this; }
    }

    /** Load with the devices and placement of o. */
    public Model(@NonNull String path, @NonNull Options o) {
        Objects.requireNonNull(path, "path");
        Objects.requireNonNull(o, "options");
        Tessera.init();
        this.path = path;
        byte[][] ot = new byte[o.overrides.size()][];
        for (int i = 0; i < ot.length; i++) ot[i] = o.overrides.get(i).getBytes(StandardCharsets.UTF_8);
        handle = nativeLoad(path.getBytes(StandardCharsets.UTF_8),
                o.devices == null ? null : o.devices.getBytes(StandardCharsets.UTF_8), o.nGpuLayers, ot,
                o.nCpuMoe);
        if (o.mmproj != null) {
            try {
                projector = nativeLoadProjector(handle, o.mmproj.getBytes(StandardCharsets.UTF_8), !o.mmprojOffload);
            } catch (RuntimeException e) {
                nativeFree(handle);
                handle = 0;
                closed = true;
                throw e;
            }
        }
    }

    synchronized long handle() {
        if (handle == 0) throw new IllegalStateException("Model is closed");
        return handle;
    }

    /** A session or embedder opens (it holds the weights until released). */
    synchronized long retain() {
        if (closed) throw new IllegalStateException("Model is closed");
        children++;
        return handle;
    }

    synchronized void release() {
        if (--children == 0 && closed && handle != 0) free();
    }

    private void free() {
        nativeFreeProjector(projector);
        projector = 0;
        nativeFree(handle);
        handle = 0;
    }

    /** Whether it was loaded with a projector that takes images ({@link Options#mmproj}). */
    public synchronized boolean hasVision() {
        return projector != 0 && nativeProjectorVision(projector);
    }

    /** The projector's type ("mlp", ...), or null without one. */
    public synchronized @Nullable String projectorType() {
        return projector == 0 ? null : nativeProjectorType(projector);
    }

    /* the projector for a prompt with images; where names the first image */
    synchronized long projector(String where) {
        handle();
        if (projector == 0)
            throw new IllegalArgumentException(where + ": an image needs a multimodal projector, and this model ("
                    + path + ") was loaded without one: load it with new Model(path, new Model.Options()"
                    + ".mmproj(\"mmproj-MODEL.gguf\"))");
        if (!nativeProjectorVision(projector))
            throw new IllegalArgumentException(where + ": the loaded projector (" + nativeProjectorType(projector)
                    + ") takes no images");
        return projector;
    }

    /** The file it was loaded from. */
    public @NonNull String path() { return path; }
    /** "llama", "qwen2", ... */
    public @NonNull String arch() { return nativeString(handle(), 0); }
    /** One line: "llama 30 layers, dim 576, ..." */
    public @NonNull String description() { return nativeString(handle(), 1); }
    /** The devices holding the weights, GPU first. */
    public @NonNull String devices() { return nativeString(handle(), 2); }
    public int nVocab() { return nativeInt(handle(), 0); }
    public int nCtxTrain() { return nativeInt(handle(), 1); }
    public int nLayer() { return nativeInt(handle(), 2); }
    /** Floats in a token's hidden state (an embedding's length with pooling). */
    public int nEmbd() { return nativeInt(handle(), 3); }

    /** Tokens of text; addSpecial adds BOS as the vocabulary asks, parseSpecial reads "<|im_start|>" and such as special tokens. */
    public @NonNull int[] tokenize(@NonNull String text, boolean addSpecial, boolean parseSpecial) {
        Objects.requireNonNull(text, "text");
        return nativeTokenize(handle(), text.getBytes(StandardCharsets.UTF_8), addSpecial, parseSpecial);
    }

    public @NonNull String detokenize(@NonNull int[] tokens) {
        Objects.requireNonNull(tokens, "tokens");
        return new String(nativeDetokenize(handle(), tokens), StandardCharsets.UTF_8);
    }

    /**
     * The prompt tokens of a conversation through the model's chat template
     * (ChatML when the file has none), with the generation prompt added.
     *
     * @param tools the tools offered (the template's "tools"), or null
     */
    public @NonNull int[] chatTokens(@NonNull List<ChatMessage> messages, @Nullable List<Tool> tools) {
        return nativeChatTokens(handle(), chatVars(messages, tools));
    }

    private static byte[] chatVars(List<ChatMessage> messages, List<Tool> tools) {
        Objects.requireNonNull(messages, "messages");
        StringBuilder vars = new StringBuilder("{\"messages\":[");
        for (int i = 0; i < messages.size(); i++)
            vars.append(i > 0 ? "," : "").append(Objects.requireNonNull(messages.get(i), "messages[" + i + "]").toJson());
        vars.append("],\"add_generation_prompt\":true");
        if (tools != null && !tools.isEmpty()) {
            vars.append(",\"tools\":[");
            for (int i = 0; i < tools.size(); i++)
                vars.append(i > 0 ? "," : "").append(Objects.requireNonNull(tools.get(i), "tools[" + i + "]").toJson());
            vars.append(']');
        }
        vars.append('}');
        return vars.toString().getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Load a LoRA adapter of this model (a GGUF adapter as llama.cpp's
     * convert_lora_to_gguf.py writes it; --lora), checked against the
     * model (architecture, each tensor's base weight and shape); sessions
     * use it with {@link Session#setLora}. It is freed with the model.
     */
    public synchronized @NonNull LoraAdapter loadLora(@NonNull String path) {
        java.util.Objects.requireNonNull(path, "path");
        return new LoraAdapter(this, nativeLoraLoad(handle(), path.getBytes(StandardCharsets.UTF_8)), path);
    }

    static float loraAlpha(long lora) { return nativeLoraAlpha(lora); }
    static int loraNWeights(long lora) { return nativeLoraNWeights(lora); }

    /**
     * The prompt text of a conversation through the model's chat template
     * (as {@link #chatTokens} tokenizes it), a {@link ChatMessage#MEDIA_MARKER}
     * where each image goes.
     */
    public @NonNull String chatPrompt(@NonNull List<ChatMessage> messages, @Nullable List<Tool> tools) {
        byte[] b = nativeChatPrompt(handle(), chatVars(messages, tools));
        return new String(b, 1, b.length - 1, StandardCharsets.UTF_8);
    }

    /* The prompt text, and whether it begins with BOS (then none is added). */
    Object[] chatPromptBos(List<ChatMessage> messages, List<Tool> tools) {
        byte[] b = nativeChatPrompt(handle(), chatVars(messages, tools));
        return new Object[] {new String(b, 1, b.length - 1, StandardCharsets.UTF_8), b[0] != 0};
    }

    /**
     * An assistant's reply text as a message: its content, reasoning and
     * the calls of the offered tools, read in the format the model's
     * template uses (Hermes &lt;tool_call&gt;, Llama 3 JSON, Mistral
     * [TOOL_CALLS], ...) or as a bare JSON {"name", "arguments"}. A call
     * without an id gets a fresh "call_..." one.
     */
    @SuppressWarnings("unchecked")
    public @NonNull ChatMessage parseReply(@NonNull String text, @Nullable List<Tool> tools) {
        Objects.requireNonNull(text, "text");
        List<Tool> offered = tools == null ? Collections.emptyList() : tools;
        byte[][] names = new byte[offered.size()][];
        for (int i = 0; i < names.length; i++)
            names[i] = Objects.requireNonNull(offered.get(i), "tools[" + i + "]").name().getBytes(StandardCharsets.UTF_8);
        String json = new String(nativeParseReply(handle(), text.getBytes(StandardCharsets.UTF_8), names),
                StandardCharsets.UTF_8);
        Map<String, Object> parsed = (Map<String, Object>) Json.parse(json);
        List<ToolCall> calls = new ArrayList<>();
        Object list = parsed.get("tool_calls");
        if (list instanceof List)
            for (Object o : (List<Object>) list) {
                Map<String, Object> c = (Map<String, Object>) o;
                Object id = c.get("id"), args = c.get("arguments");
                calls.add(new ToolCall(id instanceof String ? (String) id
                        : "call_" + UUID.randomUUID().toString().replace("-", "").substring(0, 24),
                        String.valueOf(c.get("name")), args instanceof String ? (String) args : "{}"));
            }
        Object content = parsed.get("content"), reasoning = parsed.get("reasoning_content");
        String text2 = content instanceof String ? (String) content : null;
        if (text2 != null && text2.isEmpty() && !calls.isEmpty()) text2 = null;
        return new ChatMessage("assistant", text2, calls, null, reasoning instanceof String ? (String) reasoning : null);
    }

    /** A session (KV cache) of nCtx tokens (0: the training context), threads shared automatically. */
    public @NonNull Session newSession(int nCtx) {
        if (nCtx < 0) throw new IllegalArgumentException("nCtx is negative: " + nCtx);
        return new Session(this, nCtx, 0);
    }

    /**
     * A session of nCtx tokens (0: the training context) computing on
     * nThreads CPU threads; 0: automatic, each generation taking
     * availableProcessors() divided by the generations running at its start
     * in this process (see {@link Session#setThreads}).
     */
    public @NonNull Session newSession(int nCtx, int nThreads) {
        if (nCtx < 0) throw new IllegalArgumentException("nCtx is negative: " + nCtx);
        if (nThreads < 0) throw new IllegalArgumentException("nThreads is negative: " + nThreads);
        return new Session(this, nCtx, nThreads);
    }

    /**
     * An embedding context of nCtx tokens (0: the training context; a text
     * must fit it).
     *
     * @param pooling how token vectors become one, or null for the file's pooling_type
     */
    public @NonNull Embedder newEmbedder(@Nullable Pooling pooling, int nCtx) {
        if (nCtx < 0) throw new IllegalArgumentException("nCtx is negative: " + nCtx);
        return new Embedder(this, pooling == null ? Pooling.UNSPECIFIED : pooling, nCtx);
    }

    /**
     * The L2-normalised embedding of text (through a temporary {@link
     * Embedder} sized to it; keep an Embedder for many texts).
     */
    public @NonNull float[] embed(@NonNull String text, @Nullable Pooling pooling) {
        Objects.requireNonNull(text, "text");
        int n = tokenize(text, true, false).length;
        try (Embedder e = newEmbedder(pooling, Math.max(64, (n + 63) / 64 * 64))) {
            return e.embed(text);
        }
    }

    /** Free the weights (now, or when its last session or embedder closes). Later calls do nothing. */
    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        if (children == 0 && handle != 0) free();
    }

    private static native long nativeLoad(byte[] path, byte[] devices, int nGpuLayers, byte[][] overrides,
                                          int nCpuMoe);
    private static native void nativeFree(long model);
    private static native String nativeString(long model, int what);
    private static native int nativeInt(long model, int what);
    private static native int[] nativeTokenize(long model, byte[] text, boolean addSpecial, boolean parseSpecial);
    private static native byte[] nativeDetokenize(long model, int[] tokens);
    private static native int[] nativeChatTokens(long model, byte[] varsJson);
    private static native byte[] nativeParseReply(long model, byte[] text, byte[][] toolNames);
    private static native byte[] nativeChatPrompt(long model, byte[] varsJson);
    private static native long nativeLoraLoad(long model, byte[] path);
    private static native float nativeLoraAlpha(long lora);
    private static native int nativeLoraNWeights(long lora);
    private static native long nativeLoadProjector(long model, byte[] path, boolean noOffload);
    private static native void nativeFreeProjector(long projector);
    private static native String nativeProjectorType(long projector);
    private static native boolean nativeProjectorVision(long projector);
}
