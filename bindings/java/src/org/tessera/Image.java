package org.tessera;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.Objects;

/**
 * An image for a model loaded with a multimodal projector ({@link
 * Model.Options#mmproj}): the bytes of a JPEG, PNG, WebP, BMP or GIF file,
 * or the path of one, decoded by the engine when a prompt uses it. A
 * truncated or malformed image is a {@link TesseraException} naming it
 * ("image 0", or the file) and what is wrong. Immutable.
 */
public final class Image {
    private final byte[] data; /* null: path */
    private final String path;

    private Image(byte[] data, String path) {
        this.data = data;
        this.path = path;
    }

    /** The image in these bytes (copied). */
    public static @NonNull Image fromBytes(@NonNull byte[] data) {
        return new Image(Objects.requireNonNull(data, "data").clone(), null);
    }

    /** The image in this file, read when a prompt uses it. */
    public static @NonNull Image fromFile(@NonNull Path path) {
        return new Image(null, Objects.requireNonNull(path, "path").toString());
    }

    /** The image in this file, read when a prompt uses it. */
    public static @NonNull Image fromFile(@NonNull String path) {
        return new Image(null, Objects.requireNonNull(path, "path"));
    }

    /** The file, or null for an image given as bytes. */
    public @Nullable String path() { return path; }

    /* for the native call: the bytes (null for a file), not copied */
    byte[] data() { return data; }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof Image)) return false;
        Image i = (Image) o;
        return Arrays.equals(data, i.data) && Objects.equals(path, i.path);
    }

    @Override
    public int hashCode() { return 31 * Arrays.hashCode(data) + Objects.hashCode(path); }

    @Override
    public String toString() { return path != null ? "Image(" + path + ")" : "Image(" + data.length + " bytes)"; }
}
