package org.tessera;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/**
 * What every test program here shares: a check that prints "ok" or "FAIL"
 * and counts failures, a check that a call throws a given kind naming a
 * given part, a child process's whole stdout, and the exit status at the
 * end (0 when every check passed, 1 otherwise).
 */
final class Checks {
    static int failures;

    private Checks() {}

    static void check(boolean ok, String what) {
        System.out.println((ok ? "ok   " : "FAIL ") + what);
        if (!ok) failures++;
    }

    interface Call {
        void run() throws Exception;
    }

    static void throwsWith(Class<? extends Throwable> kind, String part, Call c, String what) {
        try {
            c.run();
            check(false, what + ": no exception");
        } catch (Throwable t) {
            check(kind.isInstance(t) && t.getMessage() != null && t.getMessage().contains(part), what + ": " + t);
        }
    }

    /** All of p's stdout, read until it closes (UTF-8). */
    static String stdout(Process p) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (InputStream in = p.getInputStream()) {
            in.transferTo(out);
        }
        return out.toString(StandardCharsets.UTF_8);
    }

    /** Print the summary line and exit with the checks' status. */
    static void finish() {
        System.out.println(failures == 0 ? "all passed" : failures + " failed");
        System.exit(failures == 0 ? 0 : 1);
    }
}
