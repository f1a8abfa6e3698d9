package org.tessera;

import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * The engine: loads the JNI library (libtessera_jni.so, which holds the
 * engine itself) and finds the backend plugins. The engine is a guest in
 * the JVM: it installs no signal handler and writes nothing to stdout or
 * stderr; its warnings go to the {@link Logger} given to {@link
 * #setLogger}, and nowhere without one.
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
    /** Receives the engine's log lines (warnings and errors, the plugins' included). */
    public interface Logger {
        /**
         * One line (no final newline) as the tessera CLI prints it on
         * stderr, e.g. "tessera: model: warning: ...". Called on whichever
         * thread logs (a plugin's worker thread too, attached to the JVM for
         * the call), possibly on several at once: be quick and thread-safe,
         * and do not call the engine from it. What it throws is dropped.
         */
        void log(int level, @NonNull String line);
    }

    /** Levels of {@link Logger#log}. */
    public static final int LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3;

    private static boolean loaded, initialized;

    private Tessera() {}

    private static synchronized void load() {
        if (loaded) return;
        System.loadLibrary("tessera_jni");
        loaded = true;
    }

    /** Gives the engine's log lines to the sink's logger; the native side calls onLine. */
    static final class LogSink {
        private final Logger logger;

        LogSink(Logger logger) { this.logger = logger; }

        void onLine(int level, byte[] line) {
            logger.log(level, new String(line, StandardCharsets.UTF_8));
        }
    }

    /**
     * Send the engine's log lines to logger (null: nowhere, the default).
     * Call it before {@link #init} to see the plugins' discovery too. Lines
     * already on their way may still reach the previous logger.
     */
    public static synchronized void setLogger(@Nullable Logger logger) {
        load();
        nativeSetLogger(logger == null ? null : new LogSink(logger));
    }

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
        load();
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
    private static native void nativeSetLogger(LogSink sink);
    private static native String[] nativeDevices();
    private static native String nativeVersion();
}
