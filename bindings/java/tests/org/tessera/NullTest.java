package org.tessera;

import static org.tessera.Checks.*;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * null wherever the API takes an object, after a generation, under
 * -Xcheck:jni: a NullPointerException naming the parameter each time, the
 * JVM alive and the session still generating. Then every native with an
 * object parameter is called directly (reflection) with each of its objects
 * null, and every native taking a handle with handle 0: an exception, never
 * a crash. Run as a plain main it starts itself (--child) in a JVM with
 * -Xcheck:jni and checks that JVM's stdout and stderr: exit 0, "all passed",
 * and no "handler modified" (a library replaced the JVM's signal handlers),
 * no JNI warning, no fatal error. Exits 0, 1 or 77 (no model).
 */
public final class NullTest {
    static void npe(String param, Call c) {
        try {
            c.run();
            check(false, param + " null: no exception");
        } catch (NullPointerException e) {
            check(e.getMessage() != null && e.getMessage().contains(param), param + " null: NullPointerException \"" + e.getMessage() + "\"");
        } catch (Throwable t) {
            check(false, param + " null: " + t);
        }
    }

    static int length(String s) {
        return s.length();
    }

    /**
     * The JVM's own null check: compiled code reads through the reference
     * and the JVM's SIGSEGV handler turns the fault into the exception, so
     * a library that replaced that handler kills the JVM here.
     */
    static void jvmNullCheck() {
        int total = 0;
        for (int i = 0; i < 300000; i++) total += length(i % 3 == 0 ? "abc" : "de");
        try {
            total += length(null);
            check(false, "the JVM's null check: no exception");
        } catch (NullPointerException e) {
            check(total > 0, "the JVM's own null check, in compiled code, after a generation: NullPointerException");
        }
    }

    static long handleOf(Object o) throws Exception {
        Field f = o.getClass().getDeclaredField("handle");
        f.setAccessible(true);
        return f.getLong(o);
    }

    static Object dummy(Class<?> t, long handle) {
        if (t == long.class) return handle;
        if (t == int.class) return 0;
        if (t == boolean.class) return false;
        if (t == float.class) return 0f;
        if (t == byte[].class) return new byte[0];
        if (t == int[].class) return new int[0];
        if (t == long[].class) return new long[0];
        if (t == float[].class) return new float[0];
        if (t == byte[][].class) return new byte[0][];
        if (t == Session.Utf8Pieces.class) return new Session.Utf8Pieces(null, new String[0]);
        throw new IllegalArgumentException("no dummy for " + t);
    }

    /** Call m with args; an exception of the API's kinds or a normal return passes, anything else fails. */
    static void callNative(Method m, Object[] args, String what, boolean wantNpe) {
        String name = m.getDeclaringClass().getSimpleName() + "." + m.getName() + " " + what;
        try {
            m.invoke(null, args);
            check(!wantNpe, name + ": returned");
        } catch (InvocationTargetException e) {
            Throwable t = e.getCause();
            boolean expected = t instanceof NullPointerException || t instanceof IllegalStateException
                    || t instanceof IllegalArgumentException || t instanceof TesseraException;
            check(expected && (!wantNpe || t instanceof NullPointerException), name + ": " + t);
        } catch (IllegalAccessException e) {
            check(false, name + ": " + e);
        }
    }

    static void natives(Model model, Session session, Embedder embedder) throws Exception {
        Object[][] owners = {{Model.class, handleOf(model)}, {Session.class, handleOf(session)},
                             {Embedder.class, handleOf(embedder)}};
        int calls = 0;
        for (Object[] owner : owners) {
            Class<?> cls = (Class<?>) owner[0];
            long h = (Long) owner[1];
            Method[] methods = cls.getDeclaredMethods();
            Arrays.sort(methods, (a, b) -> a.toString().compareTo(b.toString()));
            for (Method m : methods) {
                /* the frees take what they free: a dummy handle would be freed */
                if (!Modifier.isNative(m.getModifiers()) || m.getName().equals("nativeFree")
                        || m.getName().equals("nativeFreeProjector"))
                    continue;
                m.setAccessible(true);
                Class<?>[] types = m.getParameterTypes();
                for (int j = 0; j < types.length; j++) {
                    if (types[j].isPrimitive()) continue;
                    Object[] args = new Object[types.length];
                    for (int k = 0; k < types.length; k++) args[k] = k == j ? null : dummy(types[k], h);
                    /* the nullable ones: devices, tensor overrides, grammar, jsonSchema, samplers, breakers */
                    boolean nullable = (m.getName().equals("nativeLoad") && (j == 1 || j == 3))
                            || (m.getName().equals("nativeGenerate") && j >= 5 && j <= 8);
                    callNative(m, args, "parameter " + j + " null", !nullable);
                    calls++;
                }
                if (types.length > 0 && types[0] == long.class && !m.getName().equals("nativeNew")) {
                    Object[] args = new Object[types.length];
                    for (int k = 0; k < types.length; k++) args[k] = dummy(types[k], 0);
                    callNative(m, args, "handle 0", false);
                    calls++;
                }
            }
        }
        check(calls > 15, calls + " direct native calls, none crashed");
    }

    static void child(String path) throws Exception {
        List<String> logged = new java.util.concurrent.CopyOnWriteArrayList<>();
        Tessera.setLogger((level, line) -> logged.add(line)); /* its JNI calls under -Xcheck:jni too */
        Tessera.init();
        String cpu = null;
        for (String d : Tessera.devices())
            if (d.split(" ")[1].equals("CPU") && !d.startsWith("ref ")) cpu = d.split(" ")[0];
        try (Model warned = new Model(path, cpu, 99)) {
            check(!logged.isEmpty(), "a warning through the logger: " + logged);
        }
        Session.Options opts = new Session.Options().maxTokens(8).temperature(0);
        try (Model model = new Model(path); Session s = model.newSession(512);
             Embedder e = model.newEmbedder(Pooling.MEAN, 128)) {
            String first = s.generate("The capital of France is", opts, null);
            check(!first.isEmpty(), "a first generation: " + first);
            jvmNullCheck();
            npe("prompt", () -> s.generate((String) null, opts, null));
            npe("prompt", () -> s.generate((int[]) null, opts, null));
            npe("messages", () -> s.chat(null, opts, null));
            npe("messages", () -> s.chat(null, List.of(), opts, null));
            npe("messages[0]", () -> s.chat(Arrays.asList((ChatMessage) null), opts, null));
            npe("tools[0]", () -> s.chat(List.of(ChatMessage.user("hi")), Arrays.asList((Tool) null), opts, null));
            npe("state", () -> s.loadState((byte[]) null));
            npe("path", () -> s.loadState((Path) null));
            npe("path", () -> s.saveState((Path) null));
            npe("path", () -> new Model(null));
            npe("path", () -> new Model(null, null, -1));
            npe("pluginDirs[0]", () -> Tessera.init(new String[] {null}));
            npe("text", () -> model.tokenize(null, true, false));
            npe("tokens", () -> model.detokenize(null));
            npe("messages", () -> model.chatTokens(null, null));
            npe("tools[0]", () -> model.chatTokens(List.of(ChatMessage.user("hi")), Arrays.asList((Tool) null)));
            npe("text", () -> model.parseReply(null, null));
            npe("text", () -> model.embed(null, Pooling.MEAN));
            npe("text", () -> e.embed(null));
            npe("tokens", () -> e.embedTokens(null, 2));
            npe("path", () -> model.loadLora(null));
            npe("adapter", () -> s.setLora(null, 1f));
            npe("adapter", () -> s.removeLora(null));
            npe("data", () -> Image.fromBytes(null));
            npe("path", () -> Image.fromFile((String) null));
            npe("path", () -> Image.fromFile((Path) null));
            npe("images", () -> ChatMessage.user("hi", (Image[]) null));
            npe("images[0]", () -> ChatMessage.user("hi", (Image) null));
            npe("images", () -> s.generate("hi", (List<Image>) null, opts, null));
            npe("images[0]", () -> s.generate("hi", Arrays.asList((Image) null), opts, null));
            npe("a", () -> Embedder.cosine(null, new float[1]));
            npe("stops", () -> new Session.Options().stop((String[]) null));
            npe("stops[1]", () -> new Session.Options().stop("a", null));
            npe("choice", () -> new Session.Options().toolChoice(null));
            npe("role", () -> new ChatMessage(null, "x"));
            npe("content", () -> ChatMessage.user(null));
            npe("toolCalls[i]", () -> new ChatMessage("assistant", null, Arrays.asList((ToolCall) null), null, null));
            npe("name", () -> new ToolCall("id", null, "{}"));
            npe("arguments", () -> new ToolCall("id", "f", null));
            npe("name", () -> new Tool(null, null, null));
            natives(model, s, e);
            /* the nullable ones take null */
            String again = s.generate("The capital of France is", null, null);
            check(again != null, "options and callback may be null");
            check(s.generate("The capital of France is", opts, null).equals(first), "the session still generates the same");
            Tessera.init((String[]) null);
            Tessera.setLogger(null);
            check(Tessera.devices().length > 0, "Tessera.init(null), setLogger(null) and devices() after all that");
        }
        finish();
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--child")) {
            child(args[1]);
            return;
        }
        String path = args.length > 0 ? args[0]
                : System.getProperty("user.home") + "/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf";
        if (!Files.exists(Paths.get(path))) {
            System.out.println("skip: " + path + " absent (scripts/fetch-models.sh)");
            System.exit(77);
        }
        String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(java, "-Xcheck:jni", "-Xss4m",
                "-Djava.library.path=" + System.getProperty("java.library.path"),
                "-cp", System.getProperty("java.class.path"), NullTest.class.getName(), "--child", path)
                .redirectErrorStream(true).start();
        String text = stdout(p);
        boolean exited = p.waitFor(600, TimeUnit.SECONDS);
        System.out.println("---- the -Xcheck:jni JVM's output:");
        System.out.print(text);
        System.out.println("----");
        int rc = exited ? p.exitValue() : -1;
        String lower = text.toLowerCase();
        check(rc == 0, "the -Xcheck:jni JVM exits 0 (" + rc + ")");
        check(text.contains("all passed"), "its checks passed");
        check(!lower.contains("handler modified"), "no signal handler of the JVM replaced (\"handler modified\")");
        check(!text.contains("WARNING in native method") && !lower.contains("warning: jni"), "no JNI warning");
        check(!text.contains("FATAL ERROR") && !text.contains("A fatal error has been detected")
                && !text.contains("crashed with signal"), "no fatal error, no crash");
        finish();
    }
}
