package org.tessera;

import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * The engine: loads the JNI library (libtessera_jni.so, which holds the
 * engine itself) and finds the backend plugins.
 *
 * <pre>
 * Tessera.init();                       // or init(dir) with the plugins' folder
 * try (Model model = new Model("model.gguf");
 *      Session session = model.newSession(2048)) {
 *     String text = session.generate("The capital of France is",
 *             new Session.Options().maxTokens(16).temperature(0), piece -&gt; {
 *                 System.out.print(piece);
 *                 return true;              // false stops the generation
 *             });
 * }
 * </pre>
 */
public final class Tessera {
    private static boolean initialized;

    private Tessera() {}

    /**
     * Load libtessera_jni.so (from java.library.path, or an app's native
     * library folder on Android) and discover the plugins: pluginDirs
     * first (on Android: getApplicationInfo().nativeLibraryDir), then
     * TESSERA_PLUGIN_PATH and the "tessera" folder beside the library.
     * Later calls do nothing.
     */
    public static synchronized void init(@Nullable String... pluginDirs) {
        byte[][] dirs = new byte[pluginDirs == null ? 0 : pluginDirs.length][];
        for (int i = 0; i < dirs.length; i++)
            dirs[i] = Objects.requireNonNull(pluginDirs[i], "pluginDirs[" + i + "]").getBytes(StandardCharsets.UTF_8);
        if (initialized) return;
        System.loadLibrary("tessera_jni");
        nativeInit(dirs);
        initialized = true;
    }

    /** The devices found, one line each: "name kind description". */
    public static @NonNull String[] devices() {
        init();
        return nativeDevices();
    }

    /** The engine's version, e.g. "0.1.0". */
    public static @NonNull String version() {
        init();
        return nativeVersion();
    }

    private static native void nativeInit(byte[][] pluginDirs);
    private static native String[] nativeDevices();
    private static native String nativeVersion();
}
