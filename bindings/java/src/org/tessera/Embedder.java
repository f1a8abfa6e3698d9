package org.tessera;

import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * Embedding vectors of texts, through an embedding context of a {@link
 * Model} (llama.cpp's --embeddings): {@code model.newEmbedder(Pooling.MEAN,
 * 512).embed("text")} gives `tessera embed --pooling mean`'s vector. One
 * text at a time (methods are synchronized); close it before the model.
 */
public final class Embedder implements AutoCloseable {
    /** Normalisations (llama.cpp's --embd-normalize): none, and L2 (the default of {@link #embed(String)}). */
    public static final int NORM_NONE = -1, NORM_L2 = 2;

    private final Model model;
    private long handle;

    Embedder(Model model, Pooling pooling, int nCtx) {
        long m = model.retain();
        try {
            handle = nativeNew(m, nCtx, pooling.value, 0);
        } catch (RuntimeException e) {
            model.release();
            throw e;
        }
        this.model = model;
    }

    private long handle() {
        if (handle == 0) throw new IllegalStateException("Embedder is closed");
        return handle;
    }

    /** Floats in one vector (the model's nEmbd, or a reranker's scores). */
    public synchronized int dim() { return nativeInt(handle(), 0); }
    /** The pooling it uses (the file's when it was asked UNSPECIFIED). */
    public synchronized @NonNull Pooling pooling() { return Pooling.of(nativeInt(handle(), 1)); }
    public synchronized int nCtx() { return nativeInt(handle(), 2); }

    /** The L2-normalised vector of text (BOS added as the vocabulary asks); with Pooling.NONE, the rows of its tokens one after another. */
    public @NonNull float[] embed(@NonNull String text) {
        return embed(text, NORM_L2);
    }

    /** The vector of text normalised by norm (NORM_NONE, NORM_L2, or llama.cpp's --embd-normalize number). */
    public @NonNull float[] embed(@NonNull String text, int norm) {
        Objects.requireNonNull(text, "text");
        return embedTokens(model.tokenize(text, true, false), norm);
    }

    public synchronized @NonNull float[] embedTokens(@NonNull int[] tokens, int norm) {
        Objects.requireNonNull(tokens, "tokens");
        return nativeEmbed(handle(), tokens, norm);
    }

    /** With Pooling.NONE: one row per token of text. */
    public @NonNull float[][] embedRows(@NonNull String text, int norm) {
        float[] flat = embed(text, norm);
        int dim = dim();
        float[][] rows = new float[flat.length / dim][];
        for (int i = 0; i < rows.length; i++) {
            rows[i] = new float[dim];
            System.arraycopy(flat, i * dim, rows[i], 0, dim);
        }
        return rows;
    }

    /** The cosine similarity of two vectors of one length. */
    public static double cosine(@NonNull float[] a, @NonNull float[] b) {
        Objects.requireNonNull(a, "a");
        Objects.requireNonNull(b, "b");
        if (a.length != b.length) throw new IllegalArgumentException("lengths differ: " + a.length + " and " + b.length);
        double ab = 0, aa = 0, bb = 0;
        for (int i = 0; i < a.length; i++) {
            ab += (double) a[i] * b[i];
            aa += (double) a[i] * a[i];
            bb += (double) b[i] * b[i];
        }
        return ab / Math.sqrt(aa * bb);
    }

    @Override
    public synchronized void close() {
        if (handle == 0) return;
        nativeFree(handle);
        handle = 0;
        model.release();
    }

    private static native long nativeNew(long model, int nCtx, int pooling, int nThreads);
    private static native void nativeFree(long embedder);
    private static native int nativeInt(long embedder, int what);
    private static native float[] nativeEmbed(long embedder, int[] tokens, int norm);
}
