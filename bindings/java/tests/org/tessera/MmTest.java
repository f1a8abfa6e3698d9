package org.tessera;

import static org.tessera.Checks.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Images through the Java binding on tests/mtmd's synthetic LLaVA pair
 * (TESSERA_MM_DIR: the build folder holding it, TESSERA_MM_DATA:
 * tests/data/mm), as bindings/python/tests/test_mtmd.py does it: chat() with
 * an image given as bytes and as a path, and generate() with an image in a
 * raw prompt, give exactly the greedy text of `tessera run --mmproj ...
 * --image ...` on the same prompt (the chat template's text, <__media__>
 * where the image is); streamed the same; a generation stopped after 6
 * tokens and continued gives the same text; another image its own text.
 * Without a projector an image is an IllegalArgumentException naming it; a
 * truncated image, a missing file, a marker count that does not match are
 * TesseraExceptions naming them, and the session still answers after them.
 * Exits 0, 1 (a check failed) or 77 (the pair is absent).
 */
public final class MmTest {
    static final int N = 16;

    /** `tessera run`'s greedy text after prompt with image (its stdout less the final newline). */
    static String cliRun(String model, String proj, String image, String prompt) throws Exception {
        Process p = new ProcessBuilder(System.getenv("TESSERA_BIN"), "run", "-m", model, "--mmproj", proj, "--image",
                image, "-p", prompt, "-n", String.valueOf(N), "--temp", "0", "--no-echo", "--no-escape", "-c", "512")
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String text = stdout(p);
        check(p.waitFor() == 0, "tessera run --mmproj --image " + Paths.get(image).getFileName() + " exits 0");
        return text.isEmpty() ? text : text.substring(0, text.length() - 1);
    }

    public static void main(String[] args) throws Exception {
        String dir = System.getenv().getOrDefault("TESSERA_MM_DIR", "");
        String data = System.getenv().getOrDefault("TESSERA_MM_DATA", "");
        String model = Paths.get(dir, "synth-llava-f32.gguf").toString();
        String proj = Paths.get(dir, "mmproj-synth-llava-f32.gguf").toString();
        String sq = Paths.get(data, "sq56.png").toString(), wide = Paths.get(data, "wide.png").toString();
        for (String f : new String[] {model, proj, sq, wide})
            if (dir.isEmpty() || data.isEmpty() || !Files.exists(Paths.get(f))) {
                System.out.println("SKIP: the synthetic LLaVA pair is absent (TESSERA_MM_DIR, TESSERA_MM_DATA): " + f);
                System.exit(77);
            }
        byte[] png = Files.readAllBytes(Paths.get(sq));
        Session.Options greedy = new Session.Options().maxTokens(N).temperature(0);
        try (Model vlm = new Model(model, new Model.Options().mmproj(proj)); Session s = vlm.newSession(512)) {
            check(vlm.hasVision() && "mlp".equals(vlm.projectorType()), "projector loaded: " + vlm.projectorType());
            List<ChatMessage> msgs = List.of(ChatMessage.user("Once upon a time", Image.fromBytes(png)));
            String prompt = vlm.chatPrompt(msgs, null);
            check(prompt.contains("<__media__>Once upon a time"), "the template's text has the marker: " + prompt);
            String want = cliRun(model, proj, sq, prompt);
            check(!want.isEmpty(), "tessera run's text: " + want);
            String got = s.chat(msgs, greedy, null).content();
            check(want.equals(got), "chat, image as bytes = tessera run: " + got);
            int[] toks = s.tokens();
            long rows = Arrays.stream(toks).filter(t -> t < 0).count();
            check(rows == 16 && toks.length > 16, "the image's 16 rows among the session's tokens: " + rows);
            got = s.chat(List.of(ChatMessage.user("Once upon a time", Image.fromFile(Paths.get(sq)))), greedy, null)
                    .content();
            check(want.equals(got), "chat, image as a path = tessera run");
            StringBuilder pieces = new StringBuilder();
            s.chat(msgs, greedy, p -> {
                pieces.append(p);
                return true;
            });
            check(want.equals(pieces.toString()), "streamed pieces = tessera run");
            /* stopped after 6 tokens, then continued: the same text (the cache holds the image's rows) */
            String head = s.chat(msgs, greedy.copy().maxTokens(6), null).content();
            String tail = s.continueGenerating(greedy.copy().maxTokens(N - 6), null);
            check(want.equals(head + tail), "6 tokens then continueGenerating = tessera run: " + head + "|" + tail);
            /* a raw prompt: the marker where the image goes, BOS as tessera run adds it */
            String raw = "A picture: <__media__> It shows";
            String wantWide = cliRun(model, proj, wide, raw);
            got = s.generate(raw, List.of(Image.fromFile(wide)), greedy, null);
            check(wantWide.equals(got), "generate, raw prompt with the wide image = tessera run: " + got);
            String wantSq = cliRun(model, proj, sq, raw);
            check(!wantSq.equals(wantWide), "another image, another text: " + wantSq);
            check(wantSq.equals(s.generate(raw, List.of(Image.fromBytes(png)), greedy, null)),
                    "generate, the square image as bytes = tessera run");
            /* no marker: the image goes first */
            String lead = cliRun(model, proj, sq, "<__media__>Once upon a time");
            check(lead.equals(s.generate("Once upon a time", List.of(Image.fromBytes(png)), greedy, null)),
                    "generate without a marker: the image before the text");

            throwsWith(TesseraException.class, "image 0",
                    () -> s.chat(List.of(ChatMessage.user("hi", Image.fromBytes(Arrays.copyOf(png, png.length / 2)))),
                            greedy, null), "a truncated image");
            throwsWith(TesseraException.class, "/nonexistent/a.png",
                    () -> s.generate("hi", List.of(Image.fromFile("/nonexistent/a.png")), greedy, null),
                    "a missing image file");
            throwsWith(TesseraException.class, "marker",
                    () -> s.generate("<__media__> and <__media__>", List.of(Image.fromBytes(png)), greedy, null),
                    "two markers, one image");
            check(want.equals(s.chat(msgs, greedy, null).content()), "after the errors, the same answer");
            check(s.tokens().length > 16, "tokens() after the errors");
        }
        try (Model text = new Model(model); Session s = text.newSession(512)) {
            check(!text.hasVision() && text.projectorType() == null, "without a projector: no vision");
            throwsWith(IllegalArgumentException.class, "messages[1].images[0]",
                    () -> s.chat(List.of(ChatMessage.system("Be brief."), ChatMessage.user("hi", Image.fromBytes(png))),
                            greedy, null), "an image for a model without a projector");
            throwsWith(IllegalArgumentException.class, "mmproj",
                    () -> s.generate("hi", List.of(Image.fromFile(sq)), greedy, null), "generate: the same, naming mmproj");
            check(!s.generate("Once upon a time", greedy.copy().maxTokens(4), null).isEmpty(), "text still generates");
        }
        throwsWith(TesseraException.class, "mmproj", () -> new Model(model, new Model.Options().mmproj(model)).close(),
                "a text model as the projector");
        throwsWith(TesseraException.class, "mmproj",
                () -> new Model(model, new Model.Options().mmproj("/nonexistent/mmproj.gguf")).close(),
                "a missing projector file");
        finish();
    }
}
