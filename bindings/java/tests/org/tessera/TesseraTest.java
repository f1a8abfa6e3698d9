package org.tessera;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Java binding on the JVM against SmolLM2-135M-Instruct: greedy text
 * equal to `tessera run`'s, streaming, cancellation from another thread,
 * exceptions, chat, a JSON schema, and 100 open/close cycles with flat RSS.
 * Plain main (no test framework needed): exits 0, 1 (a check failed) or 77
 * (the model is absent).
 */
public final class TesseraTest {
    static int failures;

    static void check(boolean ok, String what) {
        System.out.println((ok ? "ok   " : "FAIL ") + what);
        if (!ok) failures++;
    }

    static String cliRun(String model, String prompt, int n) throws Exception {
        Process p = new ProcessBuilder(System.getenv("TESSERA_BIN"), "run", "-m", model, "-p", prompt, "-n",
                String.valueOf(n), "--temp", "0").redirectError(ProcessBuilder.Redirect.DISCARD).start();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (InputStream in = p.getInputStream()) {
            in.transferTo(out);
        }
        p.waitFor();
        String text = out.toString(StandardCharsets.UTF_8);
        return text.substring(prompt.length(), text.length() - 1); // the echoed prompt, the final newline
    }

    /** `tessera chat`'s greedy one-shot answer (its stdout, less the final newline). */
    static String cliChat(String model, String question, int n) throws Exception {
        Process p = new ProcessBuilder(System.getenv("TESSERA_BIN"), "chat", "-m", model, "-p", question, "-n",
                String.valueOf(n), "--temp", "0").redirectError(ProcessBuilder.Redirect.DISCARD).start();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (InputStream in = p.getInputStream()) {
            in.transferTo(out);
        }
        p.waitFor();
        return out.toString(StandardCharsets.UTF_8).strip();
    }

    static long rssKiB() throws Exception {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status")))
            if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
        return -1;
    }

    static void greedyAndStreaming(Model model, String path) throws Exception {
        Session.Options greedy = new Session.Options().maxTokens(24).temperature(0);
        for (String prompt : new String[] {"The capital of France is", "def fibonacci(n):"}) {
            try (Session s = model.newSession(512)) {
                List<String> pieces = new ArrayList<>();
                String text = s.generate(prompt, greedy, piece -> pieces.add(piece));
                String want = cliRun(path, prompt, 24);
                check(text.equals(want), "greedy equals tessera run for '" + prompt + "': " + text.replace("\n", "\\n"));
                check(pieces.size() > 1 && String.join("", pieces).equals(text), "streamed pieces (" + pieces.size() + ") join to the text");
            }
        }
    }

    static void cancellation(Model model) throws Exception {
        try (Session s = model.newSession(1024)) {
            CountDownLatch first = new CountDownLatch(1);
            List<String> pieces = new ArrayList<>();
            AtomicReference<String> result = new AtomicReference<>();
            Thread gen = new Thread(() -> result.set(s.generate("Write a very long story.",
                    new Session.Options().maxTokens(100000).temperature(0), piece -> {
                        synchronized (pieces) { pieces.add(piece); }
                        first.countDown();
                        return true;
                    })));
            gen.start();
            check(first.await(60, TimeUnit.SECONDS), "the generation streams its first piece");
            s.cancel();
            gen.join(30000);
            check(!gen.isAlive() && result.get() != null, "cancel() from another thread stops it (" + pieces.size() + " pieces)");
            String again = s.generate("The capital of France is", new Session.Options().maxTokens(4).temperature(0), null);
            check(again.contains("Paris"), "the session works after a cancel: " + again);
            int[] count = {0};
            s.generate("Once upon a time", new Session.Options().maxTokens(50).temperature(0), piece -> ++count[0] < 3);
            check(count[0] == 3, "a callback returning false stops after that piece");
        }
    }

    static void chatAndSchema(Model model, String path) throws Exception {
        try (Session s = model.newSession(1024)) {
            String reply = s.chat(new String[] {"user"}, new String[] {"What is the capital of France?"},
                    new Session.Options().maxTokens(32).temperature(0), null);
            String want = cliChat(path, "What is the capital of France?", 32);
            check(reply.strip().equals(want), "chat through the model's template equals tessera chat's: " + reply.replace("\n", " "));
            String schema = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":20}},"
                    + "\"required\":[\"city\"],\"additionalProperties\":false}";
            String json = s.chat(new String[] {"user"}, new String[] {"Which city is the capital of France? Answer in JSON."},
                    new Session.Options().maxTokens(32).temperature(0).jsonSchema(schema), null);
            check(json.matches("\\{\\s*\"city\"\\s*:\\s*\"[^\"]*\"\\s*\\}"), "JSON-schema answer: " + json);
        }
    }

    static void exceptions(String path) throws Exception {
        String[] msg = new String[1];
        try (Model m = new Model("/nonexistent/model.gguf")) {
            msg[0] = null;
        } catch (TesseraException e) {
            msg[0] = e.getMessage();
        }
        check(msg[0] != null && msg[0].contains("/nonexistent/model.gguf"), "missing file: " + msg[0]);
        msg[0] = null;
        try (Model m = new Model(path, "nosuchdevice0", -1)) {
            msg[0] = null;
        } catch (TesseraException e) {
            msg[0] = e.getMessage();
        }
        check(msg[0] != null && msg[0].contains("nosuchdevice0"), "bad device name: " + msg[0]);
        Path junk = Files.createTempFile("tessera-junk", ".gguf");
        Files.write(junk, "not a model".getBytes(StandardCharsets.UTF_8));
        msg[0] = null;
        try (Model m = new Model(junk.toString())) {
            msg[0] = null;
        } catch (TesseraException e) {
            msg[0] = e.getMessage();
        }
        Files.delete(junk);
        check(msg[0] != null && msg[0].contains("tessera-junk"), "not a GGUF file: " + msg[0]);
        try (Model m = new Model(path); Session s = m.newSession(256)) {
            msg[0] = null;
            try {
                s.generate("x", new Session.Options().grammar("root ::= ("), null);
            } catch (TesseraException e) {
                msg[0] = e.getMessage();
            }
            check(msg[0] != null && msg[0].contains("grammar"), "bad grammar: " + msg[0]);
            msg[0] = null;
            try {
                s.generate("word ".repeat(400), new Session.Options().maxTokens(1), null);
            } catch (TesseraException e) {
                msg[0] = e.getMessage();
            }
            check(msg[0] != null && msg[0].contains("nCtx"), "prompt longer than the context: " + msg[0]);
            s.close();
            boolean closed = false;
            try {
                s.generate("x", null, null);
            } catch (IllegalStateException e) {
                closed = true;
            }
            check(closed, "a closed session is an IllegalStateException");
        }
    }

    static void openCloseCycles(String path) throws Exception {
        long base = 0;
        for (int i = 1; i <= 100; i++) {
            try (Model m = new Model(path); Session s = m.newSession(256)) {
                s.generate("Hi", new Session.Options().maxTokens(1).temperature(0), null);
            }
            if (i == 10) {
                System.gc();
                base = rssKiB();
            }
        }
        System.gc();
        long end = rssKiB();
        check(end - base < 24 * 1024, "100 open/close cycles: RSS " + base / 1024 + " MiB after 10, " + end / 1024 + " MiB after 100");
    }

    public static void main(String[] args) throws Exception {
        String path = args.length > 0 ? args[0]
                : System.getProperty("user.home") + "/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf";
        if (!Files.exists(Paths.get(path))) {
            System.out.println("skip: " + path + " absent (scripts/fetch-models.sh)");
            System.exit(77);
        }
        Tessera.init();
        String[] devices = Tessera.devices();
        check(devices.length > 0 && devices[devices.length - 1].startsWith("ref "), "devices end with ref: " + String.join("; ", devices));
        try (Model model = new Model(path)) {
            check(model.arch().equals("llama") && model.nVocab() == 49152, "metadata: " + model.description());
            int[] toks = model.tokenize("Hello, world! \uD83D\uDE00", false, false);
            check(model.detokenize(toks).equals("Hello, world! \uD83D\uDE00"), "tokenize/detokenize round trip, emoji included");
            greedyAndStreaming(model, path);
            cancellation(model);
            chatAndSchema(model, path);
        }
        exceptions(path);
        openCloseCycles(path);
        System.out.println(failures == 0 ? "all passed" : failures + " failed");
        System.exit(failures == 0 ? 0 : 1);
    }
}
