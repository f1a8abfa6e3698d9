package org.tessera;

import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * 250 load/generate/close cycles keep the process's RSS flat: VmRSS (from
 * /proc/self/status, after a System.gc()) after cycle 250 is less than
 * 8 MiB above what it was after cycle 10 (the first cycles warm the JIT,
 * the allocator's arenas and the plugins). Exits 0, 1 or 77 (no model).
 */
public final class CyclesTest {
    static final int CYCLES = 250, BASE_AT = 10;
    static final long BOUND_KIB = 8 * 1024;

    static long rssKiB() throws Exception {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status")))
            if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
        return -1;
    }

    static long settledRss() throws Exception {
        System.gc();
        System.runFinalization();
        System.gc();
        return rssKiB();
    }

    public static void main(String[] args) throws Exception {
        String path = args.length > 0 ? args[0]
                : System.getProperty("user.home") + "/.cache/tessera/models/SmolLM2-135M-Instruct.Q4_1.gguf";
        if (!Files.exists(Paths.get(path))) {
            System.out.println("skip: " + path + " absent (scripts/fetch-models.sh)");
            System.exit(77);
        }
        Tessera.init();
        long base = 0;
        Session.Options opts = new Session.Options().maxTokens(4).temperature(0);
        String first = null;
        long t0 = System.nanoTime();
        for (int i = 1; i <= CYCLES; i++) {
            try (Model m = new Model(path); Session s = m.newSession(256)) {
                String text = s.generate("Hi", opts, null);
                if (first == null) first = text;
                else if (!first.equals(text)) {
                    System.out.println("FAIL cycle " + i + " generated '" + text + "', cycle 1 '" + first + "'");
                    System.exit(1);
                }
            }
            if (i == BASE_AT) base = settledRss();
            if (i % 50 == 0) System.out.println("     cycle " + i + ": RSS " + rssKiB() / 1024 + " MiB");
        }
        long end = settledRss();
        boolean ok = end - base < BOUND_KIB;
        System.out.println((ok ? "ok   " : "FAIL ") + CYCLES + " load/generate/close cycles: RSS " + base + " KiB after "
                + BASE_AT + ", " + end + " KiB after " + CYCLES + " (growth " + (end - base) + " KiB, bound "
                + BOUND_KIB + " KiB), " + (System.nanoTime() - t0) / 1000000 + " ms");
        System.exit(ok ? 0 : 1);
    }
}
