package org.tessera;

import static org.tessera.Checks.*;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Java binding on the JVM against SmolLM2-135M-Instruct: greedy text
 * equal to `tessera run`'s, streaming, cancellation from another thread,
 * exceptions, chat with ChatMessage objects, a JSON schema, tool calls,
 * stop strings, penalties, state save/load and continue, embeddings equal
 * to `tessera embed`'s, threads. (NullTest: nulls under -Xcheck:jni;
 * CyclesTest: 250 load/generate/close cycles with flat RSS.)
 * Plain main (no test framework needed): exits 0, 1 (a check failed) or 77
 * (the model is absent).
 */
public final class TesseraTest {
    static String cliRun(String model, String prompt, int n, String... flags) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(System.getenv("TESSERA_BIN"), "run", "-m", model, "-p", prompt, "-n",
                String.valueOf(n), "--temp", "0"));
        cmd.addAll(List.of(flags));
        Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String text = stdout(p);
        p.waitFor();
        return text.substring(prompt.length(), text.length() - 1); // the echoed prompt, the final newline
    }

    /** `tessera chat`'s greedy one-shot answer (its stdout, less the final newline). */
    static String cliChat(String model, String question, int n) throws Exception {
        Process p = new ProcessBuilder(System.getenv("TESSERA_BIN"), "chat", "-m", model, "-p", question, "-n",
                String.valueOf(n), "--temp", "0").redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String text = stdout(p);
        p.waitFor();
        return text.strip();
    }

    /** llama.cpp's other samplers: the same text as tessera run with its flags and the seed. */
    static void llamaSamplers(Model model, String path) throws Exception {
        Session.Options o = new Session.Options().maxTokens(16).seed(5).temperature(0.9f).dry(0.8f, 1.75f, 2, 64)
                .drySequenceBreakers("\n", ":").xtc(0.5f, 0.1f).topNSigma(2.0f).dynatemp(0.3f, 1.0f)
                .samplers("dry", "top_k", "xtc", "temperature");
        try (Session s = model.newSession(1024)) {
            String text = s.generate("Once upon a time", o, null);
            String want = cliRun(path, "Once upon a time", 16, "--seed", "5", "--temp", "0.9", "--dry-multiplier", "0.8",
                    "--dry-sequence-breaker", "\n", "--dry-sequence-breaker", ":", "--xtc-probability", "0.5",
                    "--top-n-sigma", "2", "--dynatemp-range", "0.3", "--samplers", "dry;top_k;xtc;temperature");
            check(text.equals(want), "DRY/XTC/top-n-sigma/dynatemp/order equal tessera run: " + text.replace("\n", "\\n"));
            String miro = s.generate("Once upon a time", new Session.Options().maxTokens(16).seed(3).mirostat(2, 4.0f, 0.1f), null);
            String wantMiro = cliRun(path, "Once upon a time", 16, "--seed", "3", "--temp", "0.8", "--mirostat", "2",
                    "--mirostat-ent", "4");
            check(miro.equals(wantMiro), "mirostat 2 equals tessera run: " + miro.replace("\n", "\\n"));
            try {
                s.generate("x", new Session.Options().maxTokens(2).mirostat(3, 5.0f, 0.1f), null);
                check(false, "mirostat 3 refused");
            } catch (TesseraException e) {
                check(e.getMessage().contains("mirostat"), "mirostat 3 refused: " + e.getMessage());
            }
            try {
                s.generate("x", new Session.Options().maxTokens(2).samplers("top_k", "warp"), null);
                check(false, "an unknown sampler refused");
            } catch (TesseraException e) {
                check(e.getMessage().contains("warp"), "an unknown sampler refused: " + e.getMessage());
            }
        }
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
            String thrown = null;
            try {
                s.generate("Once upon a time", new Session.Options().maxTokens(50).temperature(0), piece -> {
                    throw new IllegalStateException("from the callback");
                });
            } catch (IllegalStateException e) {
                thrown = e.getMessage();
            }
            check("from the callback".equals(thrown), "an exception of the callback reaches the caller: " + thrown);
            check(s.generate("The capital of France is", new Session.Options().maxTokens(4).temperature(0), null)
                    .contains("Paris"), "the session works after it");
        }
    }

    static void chatAndSchema(Model model, String path) throws Exception {
        try (Session s = model.newSession(1024)) {
            ChatMessage reply = s.chat(List.of(ChatMessage.user("What is the capital of France?")),
                    new Session.Options().maxTokens(32).temperature(0), null);
            String want = cliChat(path, "What is the capital of France?", 32);
            check(reply.role().equals("assistant") && reply.toolCalls().isEmpty() && reply.content().strip().equals(want),
                    "chat through the model's template equals tessera chat's: " + reply.content().replace("\n", " "));
            String schema = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":20}},"
                    + "\"required\":[\"city\"],\"additionalProperties\":false}";
            String json = s.chat(List.of(ChatMessage.user("Which city is the capital of France? Answer in JSON.")),
                    new Session.Options().maxTokens(32).temperature(0).jsonSchema(schema), null).content();
            check(json.matches("\\{\\s*\"city\"\\s*:\\s*\"[^\"]*\"\\s*\\}"), "JSON-schema answer: " + json);
        }
    }

    static final Tool WEATHER = new Tool("get_weather", "Get the current weather in a city",
            "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":30}},"
            + "\"required\":[\"city\"],\"additionalProperties\":false}");

    static void tools(Model model) throws Exception {
        try (Session s = model.newSession(2048)) {
            List<ChatMessage> msgs = new ArrayList<>(List.of(ChatMessage.user("What is the weather in Paris?")));
            ChatMessage reply = s.chat(msgs, List.of(WEATHER),
                    new Session.Options().maxTokens(64).temperature(0).toolChoice("required"), null);
            check(reply.toolCalls().size() == 1 && reply.toolCalls().get(0).name().equals("get_weather")
                    && reply.toolCalls().get(0).argumentsMap().get("city") instanceof String
                    && reply.toolCalls().get(0).id() != null,
                    "a forced tool call parses into a ToolCall: " + reply);
            ToolCall call = reply.toolCalls().get(0);
            msgs.add(reply);
            msgs.add(ChatMessage.tool(call.id(), "sunny, 21 C"));
            int[] prompt = model.chatTokens(msgs, List.of(WEATHER));
            String rendered = model.detokenize(prompt);
            /* SmolLM2's template renders an assistant turn's content only, not its tool_calls */
            check(rendered.contains("tool\nsunny, 21 C"),
                    "the call and the tool's answer go back through the template (" + prompt.length + " tokens)");
            ChatMessage follow = s.chat(msgs, List.of(WEATHER), new Session.Options().maxTokens(16).temperature(0), null);
            check(follow.role().equals("assistant"), "the conversation goes on after the tool's answer: " + follow);
            ChatMessage parsed = model.parseReply("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}",
                    List.of(WEATHER));
            check(parsed.toolCalls().size() == 1 && "Rome".equals(parsed.toolCalls().get(0).argumentsMap().get("city"))
                    && parsed.content() == null, "parseReply reads a bare JSON call: " + parsed);
            ChatMessage plain = model.parseReply("Just text.", List.of(WEATHER));
            check(plain.toolCalls().isEmpty() && "Just text.".equals(plain.content()), "parseReply keeps plain text");
            boolean refused = false;
            try {
                s.chat(msgs, List.of(WEATHER), new Session.Options().toolChoice("nosuchtool"), null);
            } catch (IllegalArgumentException e) {
                refused = e.getMessage().contains("nosuchtool");
            }
            check(refused, "toolChoice naming no offered tool is an IllegalArgumentException");
        }
    }

    static void stopStrings(Model model) throws Exception {
        Session.Options greedy = new Session.Options().maxTokens(24).temperature(0);
        try (Session s = model.newSession(512)) {
            String full = s.generate("The capital of France is", greedy, null);
            int k = full.indexOf(' ', full.length() / 2);
            String stop = full.substring(k, Math.min(full.length(), k + 4));
            k = full.indexOf(stop);
            List<String> pieces = new ArrayList<>();
            String cut = s.generate("The capital of France is", greedy.copy().stop("\u0000never", stop),
                    piece -> pieces.add(piece));
            check(cut.equals(full.substring(0, k)) && String.join("", pieces).equals(cut),
                    "stop string '" + stop + "' ends the text before it, streamed too: " + cut.replace("\n", "\\n"));
            String same = s.generate("The capital of France is", greedy.copy().stop("\u0000never"), null);
            check(same.equals(full), "a stop string that does not come changes nothing");
        }
    }

    static int count(String text, String word) {
        int n = 0;
        for (int at = text.indexOf(word); at >= 0; at = text.indexOf(word, at + 1)) n++;
        return n;
    }

    static void penalties(Model model) throws Exception {
        String prompt = "Repeat after me: hello hello hello hello hello";
        try (Session s = model.newSession(512)) {
            Session.Options greedy = new Session.Options().maxTokens(16).temperature(0);
            String base = s.generate(prompt, greedy, null);
            String rep = s.generate(prompt, greedy.copy().repeatPenalty(1.5f), null);
            String freq = s.generate(prompt, greedy.copy().frequencyPenalty(1.0f), null);
            String pres = s.generate(prompt, greedy.copy().presencePenalty(3.0f), null);
            String off = s.generate(prompt, greedy.copy().presencePenalty(3.0f).penaltyLastN(0), null);
            System.out.println("     base '" + base + "'\n     repeat '" + rep + "'\n     frequency '" + freq
                    + "'\n     presence '" + pres + "'");
            check(count(base, "hello") > count(rep, "hello"), "the repeat penalty lowers repeats");
            check(count(base, "hello") > count(freq, "hello"), "the frequency penalty lowers repeats");
            check(count(base, "hello") > count(pres, "hello"), "the presence penalty lowers repeats");
            check(off.equals(base), "penaltyLastN(0) turns the penalties off");
        }
    }

    static void state(Model model) throws Exception {
        String prompt = "Once upon a time";
        Session.Options greedy = new Session.Options().temperature(0);
        String full;
        int[] fullTokens;
        try (Session a = model.newSession(512)) {
            full = a.generate(prompt, greedy.copy().maxTokens(40), null);
            fullTokens = a.tokens();
        }
        Path file = Files.createTempFile("tessera-state", ".bin");
        try (Session b = model.newSession(512)) {
            String first = b.generate(prompt, greedy.copy().maxTokens(20), null);
            byte[] state = b.saveState();
            b.saveState(file);
            String same = b.continueGenerating(greedy.copy().maxTokens(20), null);
            check((first + same).equals(full) && Arrays.equals(b.tokens(), fullTokens),
                    "continueGenerating goes on as the uninterrupted run");
            for (int k = 0; k < 2; k++)
                try (Session c = model.newSession(512)) {
                    if (k == 0) c.loadState(state);
                    else c.loadState(file);
                    String rest = c.continueGenerating(greedy.copy().maxTokens(20), null);
                    check((first + rest).equals(full) && Arrays.equals(c.tokens(), fullTokens),
                            "state " + (k == 0 ? "bytes (" + state.length + ")" : "file")
                            + ": restored and continued equals the uninterrupted run: " + rest.replace("\n", "\\n"));
                }
            byte[] bad = state.clone();
            bad[bad.length / 2] ^= 0x55;
            String msg = null;
            try (Session c = model.newSession(512)) {
                c.loadState(bad);
            } catch (TesseraException e) {
                msg = e.getMessage();
            }
            check(msg != null, "a corrupt state is a TesseraException: " + msg);
        } finally {
            Files.deleteIfExists(file);
        }
        try (Session c = model.newSession(512)) {
            String msg = null;
            try {
                c.continueGenerating(null, null);
            } catch (TesseraException e) {
                msg = e.getMessage();
            }
            check(msg != null && msg.contains("nothing to continue"), "continue on an empty session: " + msg);
        }
    }

    static float[] cliEmbed(String path, String text, String pooling) throws Exception {
        Process p = new ProcessBuilder(System.getenv("TESSERA_BIN"), "embed", "-m", path, "-p", text, "--pooling",
                pooling, "--embd-output-format", "json", "-c", "1024").redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String out = stdout(p);
        p.waitFor();
        @SuppressWarnings("unchecked")
        Map<String, Object> json = (Map<String, Object>) Json.parse(out);
        @SuppressWarnings("unchecked")
        List<Object> v = (List<Object>) ((Map<String, Object>) ((List<Object>) json.get("data")).get(0)).get("embedding");
        float[] f = new float[v.size()];
        for (int i = 0; i < f.length; i++) f[i] = ((Double) v.get(i)).floatValue();
        return f;
    }

    static void embeddings(Model model, String path) throws Exception {
        String text = "The capital of France is Paris.";
        for (Pooling pooling : new Pooling[] {Pooling.MEAN, Pooling.LAST}) {
            float[] want = cliEmbed(path, text, pooling.name().toLowerCase());
            try (Embedder e = model.newEmbedder(pooling, 1024)) {
                float[] got = e.embed(text);
                double cos = Embedder.cosine(got, want);
                check(e.pooling() == pooling && got.length == model.nEmbd() && e.dim() == got.length && cos > 0.9999,
                        pooling + " embedding equals tessera embed's: cosine " + cos + ", " + got.length + " floats");
                double other = Embedder.cosine(got, e.embed("A cat sat on the mat."));
                check(other < 0.99, "another text gives another vector: cosine " + other);
            }
        }
        float[] once = model.embed(text, Pooling.MEAN);
        check(Embedder.cosine(once, cliEmbed(path, text, "mean")) > 0.9999, "Model.embed gives the same vector");
        try (Embedder e = model.newEmbedder(Pooling.NONE, 256)) {
            float[][] rows = e.embedRows(text, Embedder.NORM_NONE);
            check(rows.length == model.tokenize(text, true, false).length && rows[0].length == model.nEmbd(),
                    "Pooling.NONE: one row per token (" + rows.length + ")");
        }
    }

    static void threads(Model model, String path) throws Exception {
        Session.Options greedy = new Session.Options().maxTokens(16).temperature(0);
        String want = cliRun(path, "The capital of France is", 16);
        try (Session one = model.newSession(512, 1); Session two = model.newSession(512)) {
            check(one.generate("The capital of France is", greedy, null).equals(want), "a session on 1 thread gives the same text");
            AtomicReference<String> r1 = new AtomicReference<>(), r2 = new AtomicReference<>();
            Thread t1 = new Thread(() -> r1.set(one.generate("The capital of France is", greedy, null)));
            Thread t2 = new Thread(() -> r2.set(two.generate("The capital of France is", greedy, null)));
            t1.start();
            t2.start();
            t1.join();
            t2.join();
            check(want.equals(r1.get()) && want.equals(r2.get()), "two sessions generating at once (automatic threads)");
            two.setThreads(2);
            check(two.generate("The capital of France is", greedy, null).equals(want), "setThreads(2)");
        }
    }

    /** Model.Options' placement (-ot, --cpu-moe, --n-cpu-moe) on the synthetic qwen3moe file. */
    static String moeText(String moe, Model.Options o) {
        try (Model m = new Model(moe, o); Session s = m.newSession(256)) {
            return s.generate("Once upon a time", new Session.Options().maxTokens(8).temperature(0), null);
        }
    }

    static void expertsPlaced() throws Exception {
        String dir = System.getenv("TESSERA_TEST_DATA");
        if (dir == null || !Files.exists(Paths.get(dir, "synth-qwen3moe-f32.gguf"))) {
            System.out.println("skip: experts placed: synth-qwen3moe-f32.gguf absent");
            return;
        }
        String moe = Paths.get(dir, "synth-qwen3moe-f32.gguf").toString();
        String want = moeText(moe, new Model.Options().devices("ref"));
        check(!want.isEmpty(), "qwen3moe generates");
        check(moeText(moe, new Model.Options().devices("ref").cpuMoe()).equals(want), "cpuMoe(): the same text");
        check(moeText(moe, new Model.Options().devices("ref").nCpuMoe(1)).equals(want), "nCpuMoe(1): the same text");
        check(moeText(moe, new Model.Options().devices("ref").overrideTensor("\\.ffn_(up|down|gate)_exps=CPU"))
                .equals(want), "overrideTensor: the same text");
        String msg = null;
        try {
            moeText(moe, new Model.Options().devices("ref").overrideTensor("([=CPU"));
        } catch (TesseraException e) {
            msg = e.getMessage();
        }
        check(msg != null && msg.contains("([=CPU") && msg.contains("pattern"), "a bad pattern is named: " + msg);
        boolean refused = false;
        try {
            new Model.Options().nCpuMoe(-1);
        } catch (IllegalArgumentException e) {
            refused = true;
        }
        check(refused, "nCpuMoe(-1) is an IllegalArgumentException");
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
            msg[0] = null;
            try {
                s.generate(new int[] {m.nVocab()}, null, null);
            } catch (TesseraException e) {
                msg[0] = e.getMessage();
            }
            check(msg[0] != null && msg[0].contains("out of range"), "a token out of range: " + msg[0]);
            boolean negative = false;
            try {
                m.newSession(-1);
            } catch (IllegalArgumentException e) {
                negative = true;
            }
            check(negative, "a negative nCtx is an IllegalArgumentException");
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

    /** The engine's warnings reach Tessera.setLogger's logger, and nothing after setLogger(null). */
    static void logger(String path, List<String> logged) throws Exception {
        String cpu = null;
        for (String d : Tessera.devices())
            if (d.split(" ")[1].equals("CPU") && !d.startsWith("ref ")) cpu = d.split(" ")[0];
        try (Model m = new Model(path, cpu, 99)) {
            check(logged.stream().anyMatch(l -> l.startsWith(Tessera.LOG_WARN + " ") && l.contains("-ngl 99 ignored")
                    && !l.endsWith("\n")), "a warning reaches the Logger: " + logged);
        }
        Tessera.setLogger(null);
        logged.clear();
        try (Model m = new Model(path, cpu, 99)) {
            check(logged.isEmpty(), "none after setLogger(null)");
        }
    }

    public static void main(String[] args) throws Exception {
        String path = args.length > 0 ? args[0]
                : System.getProperty("user.home") + "/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf";
        if (!Files.exists(Paths.get(path))) {
            System.out.println("skip: " + path + " absent (scripts/fetch-models.sh)");
            System.exit(77);
        }
        List<String> logged = Collections.synchronizedList(new ArrayList<>());
        Tessera.setLogger((level, line) -> logged.add(level + " " + line));
        Tessera.init();
        String[] devices = Tessera.devices();
        check(devices.length > 0 && devices[devices.length - 1].startsWith("ref "), "devices end with ref: " + String.join("; ", devices));
        try (Model model = new Model(path)) {
            check(model.arch().equals("llama") && model.nVocab() == 49152, "metadata: " + model.description());
            int[] toks = model.tokenize("Hello, world! \uD83D\uDE00", false, false);
            check(model.detokenize(toks).equals("Hello, world! \uD83D\uDE00"), "tokenize/detokenize round trip, emoji included");
            greedyAndStreaming(model, path);
            llamaSamplers(model, path);
            cancellation(model);
            chatAndSchema(model, path);
            tools(model);
            stopStrings(model);
            penalties(model);
            state(model);
            embeddings(model, path);
            threads(model, path);
        }
        expertsPlaced();
        exceptions(path);
        logger(path, logged);
        finish();
    }
}
