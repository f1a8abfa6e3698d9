package org.tessera;

import static org.tessera.Checks.*;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * LoRA adapters through the Java binding on tests/data's synthetic llama
 * and its adapters (synth-lora-base-f32, synth-lora-r4-f32 rank 4 alpha 8,
 * synth-lora-r8-f16 rank 8 alpha 4; tests/lora): Session.setLora at scale
 * 1, at 0.5 and two adapters at once each give the greedy text of `tessera
 * run --lora` / `--lora-scaled` (whose logits tests/lora checks against
 * llama.cpp's), and it differs from the base model's; scale 0,
 * removeLora and clearLoras give the base model's text again; a
 * generation stopped, the set changed and continued decodes the held
 * tokens again. Bad adapters are TesseraExceptions naming the file and
 * what is wrong, another model's adapter an IllegalArgumentException.
 * Exits 0, 1 (a check failed) or 77 (the files are absent).
 */
public final class LoraTest {
    static final int N = 12;
    static final String PROMPT = "Once upon a time";

    /** `tessera run`'s greedy text (stdout less the final newline) with flags. */
    static String cliRun(String model, String... flags) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(System.getenv("TESSERA_BIN"), "run", "-m", model, "-p", PROMPT,
                "-n", String.valueOf(N), "--temp", "0", "--no-echo", "--no-escape", "-c", "256"));
        cmd.addAll(List.of(flags));
        Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String text = stdout(p);
        check(p.waitFor() == 0, "tessera run " + String.join(" ", flags) + " exits 0");
        return text.isEmpty() ? text : text.substring(0, text.length() - 1);
    }

    public static void main(String[] args) throws Exception {
        String data = System.getenv().getOrDefault("TESSERA_TEST_DATA", "");
        String base = Paths.get(data, "synth-lora-base-f32.gguf").toString();
        String r4 = Paths.get(data, "synth-lora-r4-f32.gguf").toString();
        String r8 = Paths.get(data, "synth-lora-r8-f16.gguf").toString();
        String other = Paths.get(data, "models", "stories260K.gguf").toString();
        for (String f : new String[] {base, r4, r8, other})
            if (data.isEmpty() || !Files.exists(Paths.get(f))) {
                System.out.println("SKIP: tests/data's LoRA files are absent (TESSERA_TEST_DATA): " + f);
                System.exit(77);
            }
        String wantBase = cliRun(base), wantR4 = cliRun(base, "--lora", r4);
        String wantHalf = cliRun(base, "--lora-scaled", r4, "0.5");
        String wantTwo = cliRun(base, "--lora", r4, "--lora-scaled", r8, "0.75");
        check(!wantR4.equals(wantBase) && !wantHalf.equals(wantR4) && !wantTwo.equals(wantR4),
                "the adapters change tessera run's text: " + wantBase + " | " + wantR4 + " | " + wantHalf + " | " + wantTwo);
        Session.Options greedy = new Session.Options().maxTokens(N).temperature(0);
        try (Model m = new Model(base); Session s = m.newSession(256)) {
            LoraAdapter a4 = m.loadLora(r4), a8 = m.loadLora(r8);
            check(a4.alpha() == 8f && a8.alpha() == 4f, "alpha " + a4.alpha() + ", " + a8.alpha());
            check(a4.nWeights() == 15 && a4.path().equals(r4), "r4 adapts " + a4.nWeights() + " weights");
            check(wantBase.equals(s.generate(PROMPT, greedy, null)), "no adapter = tessera run");
            s.setLora(a4, 1f);
            String got = s.generate(PROMPT, greedy, null);
            check(wantR4.equals(got), "setLora(r4, 1) = tessera run --lora: " + got);
            s.setLora(a4, 0.5f);
            got = s.generate(PROMPT, greedy, null);
            check(wantHalf.equals(got), "setLora(r4, 0.5) = tessera run --lora-scaled 0.5: " + got);
            s.setLora(a4, 1f);
            s.setLora(a8, 0.75f);
            got = s.generate(PROMPT, greedy, null);
            check(wantTwo.equals(got) && s.loras().size() == 2, "r4 at 1 and r8 at 0.75 = tessera run: " + got);
            s.removeLora(a8);
            check(wantR4.equals(s.generate(PROMPT, greedy, null)), "removeLora(r8): r4's text again");
            s.setLora(a4, 0f);
            check(wantBase.equals(s.generate(PROMPT, greedy, null)), "scale 0: the base model's text");
            s.setLora(a4, 1f);
            s.clearLoras();
            check(wantBase.equals(s.generate(PROMPT, greedy, null)) && s.loras().isEmpty(),
                    "clearLoras: the base model's text");
            /* stopped, the set changed and changed back (the cache dropped), continued: decoded again */
            s.setLora(a4, 1f);
            String head = s.generate(PROMPT, greedy.copy().maxTokens(5), null);
            s.setLora(a8, 0f);
            String tail = s.continueGenerating(greedy.copy().maxTokens(N - 5), null);
            check(wantR4.equals(head + tail), "5 tokens, the set changed, continued = --lora's text: " + head + "|" + tail);
            /* stopped at r4 1, continued at 0.5: every held token decoded again at 0.5, as a fresh session does */
            s.clearLoras();
            s.setLora(a4, 1f);
            s.generate(PROMPT, greedy.copy().maxTokens(5), null);
            int[] held = s.tokens();
            s.setLora(a4, 0.5f);
            tail = s.continueGenerating(greedy.copy().maxTokens(N - 5), null);
            try (Session fresh = m.newSession(256)) {
                fresh.setLora(a4, 0.5f);
                String again = fresh.generate(held, greedy.copy().maxTokens(N - 5), null);
                check(again.equals(tail), "scale changed mid-way: the cache recomputed at 0.5: " + tail + " = " + again);
            }
            s.setLora(a4, 1f);

            throwsWith(TesseraException.class, "general.type", () -> m.loadLora(base), "a model as the adapter");
            throwsWith(TesseraException.class, "/nonexistent/a.gguf", () -> m.loadLora("/nonexistent/a.gguf"),
                    "a missing adapter file");
            throwsWith(IllegalArgumentException.class, "not finite", () -> s.setLora(a4, Float.NaN), "a NaN scale");
            try (Model m2 = new Model(base); Session s2 = m2.newSession(256)) {
                throwsWith(IllegalArgumentException.class, "another model", () -> s2.setLora(a4, 1f),
                        "another model's adapter");
            }
            try (Model m3 = new Model(other)) {
                throwsWith(TesseraException.class, r4, () -> m3.loadLora(r4), "an adapter of another shape");
            }
            check(wantR4.equals(s.generate(PROMPT, greedy, null)), "after the errors, r4's text");
        }
        finish();
    }
}
