package org.tessera;

import java.nio.charset.StandardCharsets;

/**
 * A loaded GGUF model. Thread-safe for reading; each thread generates
 * through its own {@link Session}. Close it (try-with-resources) after
 * its sessions.
 */
public final class Model implements AutoCloseable {
    long handle;

    /** Load with the default devices and GPU layers ("auto"). */
    public Model(String path) {
        this(path, null, -1);
    }

    /**
     * @param devices     "cpu-avx0", "vulkan0,cpu-neon0", ... or null for the default order
     * @param nGpuLayers  layers on the first GPU; -1: as many as fit
     */
    public Model(String path, String devices, int nGpuLayers) {
        Tessera.init();
        if (path == null) throw new TesseraException("model path is null");
        handle = nativeLoad(path, devices, nGpuLayers);
    }

    long handle() {
        if (handle == 0) throw new IllegalStateException("Model is closed");
        return handle;
    }

    /** "llama", "qwen2", ... */
    public String arch() { return nativeString(handle(), 0); }
    /** One line: "llama 30 layers, dim 576, ..." */
    public String description() { return nativeString(handle(), 1); }
    /** The devices holding the weights, GPU first. */
    public String devices() { return nativeString(handle(), 2); }
    public int nVocab() { return nativeInt(handle(), 0); }
    public int nCtxTrain() { return nativeInt(handle(), 1); }
    public int nLayer() { return nativeInt(handle(), 2); }

    /** Tokens of text; addSpecial adds BOS as the vocabulary asks. */
    public int[] tokenize(String text, boolean addSpecial, boolean parseSpecial) {
        return nativeTokenize(handle(), text.getBytes(StandardCharsets.UTF_8), addSpecial, parseSpecial);
    }

    public String detokenize(int[] tokens) {
        return new String(nativeDetokenize(handle(), tokens), StandardCharsets.UTF_8);
    }

    /** The prompt tokens of a conversation through the model's chat template. */
    public int[] chatTokens(String[] roles, String[] contents) {
        if (roles.length != contents.length) throw new IllegalArgumentException("roles and contents differ in length");
        byte[][] r = new byte[roles.length][], c = new byte[contents.length][];
        for (int i = 0; i < roles.length; i++) {
            r[i] = roles[i].getBytes(StandardCharsets.UTF_8);
            c[i] = contents[i].getBytes(StandardCharsets.UTF_8);
        }
        return nativeChatTokens(handle(), r, c);
    }

    /** A session (KV cache) of nCtx tokens; 0: the training context. */
    public Session newSession(int nCtx) {
        return new Session(this, nCtx);
    }

    @Override
    public synchronized void close() {
        if (handle != 0) nativeFree(handle);
        handle = 0;
    }

    private static native long nativeLoad(String path, String devices, int nGpuLayers);
    private static native void nativeFree(long model);
    private static native String nativeString(long model, int what);
    private static native int nativeInt(long model, int what);
    private static native int[] nativeTokenize(long model, byte[] text, boolean addSpecial, boolean parseSpecial);
    private static native byte[] nativeDetokenize(long model, int[] tokens);
    private static native int[] nativeChatTokens(long model, byte[][] roles, byte[][] contents);
}
