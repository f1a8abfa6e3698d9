package org.tessera;

/** How an {@link Embedder} makes one vector of a text's token vectors (llama.cpp's --pooling). */
public enum Pooling {
    /** The model file's pooling_type (none when it has none). */
    UNSPECIFIED(-1),
    /** One vector per token. */
    NONE(0),
    /** The mean over the tokens. */
    MEAN(1),
    /** The first token's (BERT's [CLS]). */
    CLS(2),
    /** The last token's (decoder embedders). */
    LAST(3),
    /** A reranker's classification head: scores. */
    RANK(4);

    final int value;

    Pooling(int value) { this.value = value; }

    static Pooling of(int value) {
        for (Pooling p : values()) if (p.value == value) return p;
        return UNSPECIFIED;
    }
}
