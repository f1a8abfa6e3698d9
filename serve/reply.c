/* reply — where a chat choice's text is reasoning, content, or (maybe) a
 * tool call, for a text that may still grow. Every boundary only moves
 * forward as text arrives, so what a stream has sent stays a prefix of what
 * the finished reply holds. */
#include <string.h>

#include <tessera/tessera_chat.h>

#include "format.h"

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) i++;
    return i;
}

static const char *find(const char *s, size_t n, size_t from, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = from; i + k <= n; i++)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

/* Bytes at the end of s[0..n) that are a proper prefix of m. */
static size_t partial(const char *s, size_t n, const char *m) {
    size_t k = strlen(m);
    for (size_t t = k - 1 < n ? k - 1 : n; t > 0; t--)
        if (!memcmp(s + n - t, m, t)) return t;
    return 0;
}

void serve_reply_split(const serve_reply_rules *rules, const char *text, size_t n, bool final, serve_split *out) {
    *out = (serve_split){.reasoning_at = 0, .reasoning_end = 0, .content_at = 0, .content_end = n};
    size_t ca = 0;
    if (rules->think_open && rules->think_close) {
        size_t ra = SIZE_MAX, q = skip_ws(text, n, 0), ol = strlen(rules->think_open);
        if (rules->starts_in_think) {
            ra = q;
        } else if (n - q >= ol && !memcmp(text + q, rules->think_open, ol)) {
            ra = skip_ws(text, n, q + ol);
        } else if (!final && n - q < ol && !memcmp(text + q, rules->think_open, n - q)) {
            out->content_end = 0; /* may still become the open marker */
            return;
        }
        if (ra != SIZE_MAX) {
            const char *close = find(text, n, ra, rules->think_close);
            out->reasoning_at = ra;
            if (close) {
                out->reasoning_end = (size_t)(close - text);
                ca = skip_ws(text, n, out->reasoning_end + strlen(rules->think_close));
            } else {
                out->reasoning_end = final ? n : n - partial(text, n, rules->think_close);
                if (out->reasoning_end < ra) out->reasoning_end = ra;
                ca = n;
            }
        }
    }
    out->content_at = ca;
    if (rules->tools && !final && ca < n)
        out->content_end = ca + tessera_tool_hold_from((tessera_tool_format)rules->tool_format, text + ca, n - ca);
    if (out->content_end < ca) out->content_end = ca;
}
