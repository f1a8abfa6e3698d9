package org.tessera;

/**
 * A LoRA adapter of a {@link Model} ({@link Model#loadLora}): a GGUF
 * adapter as llama.cpp's convert_lora_to_gguf.py writes it, applied in the
 * graph (the weights are not changed) by the sessions that set it ({@link
 * Session#setLora}). It belongs to its model and is freed with it.
 */
public final class LoraAdapter {
    private final Model model;
    private final long handle;
    private final String path;

    LoraAdapter(Model model, long handle, String path) {
        this.model = model;
        this.handle = handle;
        this.path = path;
    }

    Model model() { return model; }

    /* the handle while the model is open */
    long handle() {
        model.handle();
        return handle;
    }

    /** The file it was loaded from. */
    public @NonNull String path() { return path; }

    /** adapter.lora.alpha: the scale applied is scale * alpha / rank (0: the file has none, scale alone). */
    public float alpha() {
        synchronized (model) {
            return Model.loraAlpha(handle());
        }
    }

    /** The weights it adapts. */
    public int nWeights() {
        synchronized (model) {
            return Model.loraNWeights(handle());
        }
    }

    @Override
    public String toString() { return "LoraAdapter(" + path + ")"; }
}
