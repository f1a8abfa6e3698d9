/* tool_parse — tool calls out of generated text (formats in tool_parse.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/tool_parse.h"
#include "util/error.h"
#include "util/grow.h"

#define BAD SIZE_MAX
enum { JSON_MAX_DEPTH = 64 };

/* ------------------------------------------------------ growable string */

/* A NUL-terminated copy (never NULL unless out of memory). */
static char *buf_take(tsr_buf *b) {
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    if (!b->p) return calloc(1, 1);
    return b->p;
}

static char *dup_n(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* ------------------------------------------------------ JSON scanning */

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* s[i] == '"': the offset past the closing quote, or BAD. */
static size_t scan_string(const char *s, size_t n, size_t i) {
    for (i++; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') return i + 1;
        if (c < 0x20) return BAD;
        if (c != '\\') continue;
        if (++i >= n) return BAD;
        if (s[i] == 'u') {
            if (n - i < 5) return BAD;
            for (int k = 1; k <= 4; k++)
                if (hex_val(s[i + k]) < 0) return BAD;
            i += 4;
        } else if (!strchr("\"\\/bfnrt", s[i]) || s[i] == '\0') {
            return BAD;
        }
    }
    return BAD;
}

static size_t scan_digits(const char *s, size_t n, size_t i) {
    size_t start = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    return i > start ? i : BAD;
}

static size_t scan_number(const char *s, size_t n, size_t i) {
    if (i < n && s[i] == '-') i++;
    if (i < n && s[i] == '0') i++;
    else if ((i = scan_digits(s, n, i)) == BAD) return BAD;
    if (i < n && s[i] == '.' && (i = scan_digits(s, n, i + 1)) == BAD) return BAD;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if ((i = scan_digits(s, n, i)) == BAD) return BAD;
    }
    return i;
}

static size_t scan_value(const char *s, size_t n, size_t i, int depth);

/* A '{...}' or '[...]' at s[i]. */
static size_t scan_container(const char *s, size_t n, size_t i, int depth) {
    char close = s[i] == '{' ? '}' : ']';
    bool object = close == '}';
    if (depth >= JSON_MAX_DEPTH) return BAD;
    i = skip_ws(s, n, i + 1);
    if (i < n && s[i] == close) return i + 1;
    for (;;) {
        if (object) {
            if (i >= n || s[i] != '"' || (i = scan_string(s, n, i)) == BAD) return BAD;
            i = skip_ws(s, n, i);
            if (i >= n || s[i] != ':') return BAD;
            i++;
        }
        if ((i = scan_value(s, n, i, depth + 1)) == BAD) return BAD;
        i = skip_ws(s, n, i);
        if (i >= n) return BAD;
        if (s[i] == close) return i + 1;
        if (s[i] != ',') return BAD;
        i = skip_ws(s, n, i + 1);
    }
}

static size_t scan_value(const char *s, size_t n, size_t i, int depth) {
    i = skip_ws(s, n, i);
    if (i >= n) return BAD;
    switch (s[i]) {
    case '{':
    case '[':
        return scan_container(s, n, i, depth);
    case '"':
        return scan_string(s, n, i);
    case 't':
        return n - i >= 4 && !memcmp(s + i, "true", 4) ? i + 4 : BAD;
    case 'f':
        return n - i >= 5 && !memcmp(s + i, "false", 5) ? i + 5 : BAD;
    case 'n':
        return n - i >= 4 && !memcmp(s + i, "null", 4) ? i + 4 : BAD;
    default:
        return (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) ? scan_number(s, n, i) : BAD;
    }
}

size_t chat_json_value_end(const char *s, size_t n) {
    size_t e = s ? scan_value(s, n, 0, 0) : BAD;
    return e == BAD ? 0 : e;
}

static void put_utf8(tsr_buf *b, uint32_t cp) {
    char u[4];
    size_t k;
    if (cp < 0x80) {
        u[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18);
        u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    buf_put(b, u, k);
}

static uint32_t hex4(const char *s) {
    return (uint32_t)(hex_val(s[0]) << 12 | hex_val(s[1]) << 8 | hex_val(s[2]) << 4 | hex_val(s[3]));
}

/* The decoded text of the (already scanned, valid) JSON string s[a..b). */
static char *json_string_decode(const char *s, size_t a, size_t b) {
    tsr_buf out = {0};
    for (size_t i = a + 1; i + 1 < b; i++) {
        if (s[i] != '\\') {
            buf_putc(&out, s[i]);
            continue;
        }
        char e = s[++i];
        if (e != 'u') {
            static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
            const char *k = strchr(from, e);
            buf_putc(&out, k ? to[k - from] : e);
            continue;
        }
        uint32_t cp = hex4(s + i + 1);
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < b && s[i + 1] == '\\' && s[i + 2] == 'u') {
            uint32_t lo = hex4(s + i + 3);
            if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
        }
        if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* a lone surrogate */
        put_utf8(&out, cp);
    }
    return buf_take(&out);
}

/* s[i..j) as a JSON string literal appended to b. */
static void json_string_encode(tsr_buf *b, const char *s, size_t n) {
    buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            buf_putc(b, '\\');
            buf_putc(b, (char)c);
        } else if (c == '\n') {
            buf_put(b, "\\n", 2);
        } else if (c == '\t') {
            buf_put(b, "\\t", 2);
        } else if (c == '\r') {
            buf_put(b, "\\r", 2);
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buf_put(b, u, 6);
        } else {
            buf_putc(b, (char)c);
        }
    }
    buf_putc(b, '"');
}

/* In the object s[a..b) (valid JSON), the value of key: true and [*va, *vb)
 * when present. */
static bool json_get(const char *s, size_t a, size_t b, const char *key, size_t *va, size_t *vb) {
    size_t i = skip_ws(s, b, a + 1), klen = strlen(key);
    while (i < b && s[i] == '"') {
        size_t ke = scan_string(s, b, i);
        if (ke == BAD) return false;
        bool match = false;
        if (ke - i - 2 == klen && !memchr(s + i + 1, '\\', klen)) {
            match = !memcmp(s + i + 1, key, klen);
        } else if (memchr(s + i + 1, '\\', ke - i - 2)) {
            char *k = json_string_decode(s, i, ke);
            match = k && !strcmp(k, key);
            free(k);
        }
        i = skip_ws(s, b, ke) + 1; /* past ':' */
        size_t vs = skip_ws(s, b, i), ve = scan_value(s, b, vs, 1);
        if (ve == BAD) return false;
        if (match) {
            *va = vs;
            *vb = ve;
            return true;
        }
        i = skip_ws(s, b, ve);
        if (i < b && s[i] == ',') i = skip_ws(s, b, i + 1);
        else break;
    }
    return false;
}

/* ------------------------------------------------------ calls */

typedef struct calls {
    chat_tool_call *v;
    size_t n, cap;
    bool oom;
} calls;

static void calls_push(calls *c, char *name, char *args, char *id) {
    if (!c->oom && ARRAY_GROW(c->v, c->cap, c->n + 1, 4) < 0) c->oom = true;
    if (c->oom || !name || !args) {
        c->oom = true;
        free(name);
        free(args);
        free(id);
        return;
    }
    c->v[c->n++] = (chat_tool_call){.name = name, .arguments = args, .id = id};
}

static void calls_drop(calls *c, size_t from) {
    for (size_t i = from; i < c->n; i++) {
        free(c->v[i].name);
        free(c->v[i].arguments);
        free(c->v[i].id);
    }
    c->n = from;
}

/* Arguments as JSON object text from the value s[a..b): an object is taken
 * as is, a string holding an object is decoded, null/absent is {}. NULL when
 * it is none of those. */
static char *args_from_value(const char *s, size_t a, size_t b) {
    if (a == b || (b - a == 4 && !memcmp(s + a, "null", 4))) return dup_n("{}", 2);
    if (s[a] == '{') return dup_n(s + a, b - a);
    if (s[a] != '"') return NULL;
    char *inner = json_string_decode(s, a, b);
    if (!inner) return NULL;
    size_t n = strlen(inner), st = skip_ws(inner, n, 0);
    if (st == n) {
        free(inner);
        return dup_n("{}", 2);
    }
    size_t e = inner[st] == '{' ? scan_value(inner, n, st, 0) : BAD;
    if (e == BAD || skip_ws(inner, n, e) != n) {
        free(inner);
        return NULL;
    }
    char *out = dup_n(inner + st, e - st);
    free(inner);
    return out;
}

/* A call object s[a..b): {"name", "arguments"|"parameters"} or OpenAI's
 * {"type": "function", "function": {...}, "id"}. */
static bool call_from_object(calls *c, const char *s, size_t a, size_t b) {
    if (s[a] != '{') return false;
    size_t fa, fb, na, nb, aa = 0, ab = 0, ia, ib;
    if (json_get(s, a, b, "function", &fa, &fb) && s[fa] == '{') {
        char *id = NULL;
        if (json_get(s, a, b, "id", &ia, &ib) && s[ia] == '"') id = json_string_decode(s, ia, ib);
        size_t before = c->n;
        bool ok = call_from_object(c, s, fa, fb);
        if (ok && c->n > before && !c->v[c->n - 1].id) c->v[c->n - 1].id = id;
        else free(id);
        return ok;
    }
    if (!json_get(s, a, b, "name", &na, &nb) || s[na] != '"') return false;
    if (!json_get(s, a, b, "arguments", &aa, &ab)) json_get(s, a, b, "parameters", &aa, &ab);
    char *args = args_from_value(s, aa, ab);
    if (!args) return false;
    char *name = json_string_decode(s, na, nb);
    char *id = NULL;
    if (json_get(s, a, b, "id", &ia, &ib) && s[ia] == '"') id = json_string_decode(s, ia, ib);
    if (name && !name[0]) {
        free(name);
        free(args);
        free(id);
        return false;
    }
    calls_push(c, name, args, id);
    return true;
}

/* A JSON array of call objects at s[a..b); all or nothing. */
static bool calls_from_array(calls *c, const char *s, size_t a, size_t b) {
    size_t before = c->n, i = skip_ws(s, b, a + 1);
    while (i < b && s[i] != ']') {
        size_t e = scan_value(s, b, i, 1);
        if (e == BAD || !call_from_object(c, s, i, e)) {
            calls_drop(c, before);
            return false;
        }
        i = skip_ws(s, b, e);
        if (i < b && s[i] == ',') i = skip_ws(s, b, i + 1);
    }
    return c->n > before;
}

static const char *find(const char *s, size_t n, size_t from, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = from; i + k <= n; i++)
        if (s[i] == needle[0] && !memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

static bool starts(const char *s, size_t n, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return i <= n && n - i >= k && !memcmp(s + i, lit, k);
}

/* ------------------------------------------------------ formats */

typedef struct parse_state {
    const char *s;
    size_t n;
    tsr_buf content, reasoning;
    calls calls;
} parse_state;

/* A value of <parameter=...>: JSON when the whole (trimmed) value is a JSON
 * value other than a bare string, else the text as a JSON string. */
static void put_param_value(tsr_buf *b, const char *v, size_t n) {
    if (n > 0 && v[0] == '\n') v++, n--;
    if (n > 0 && v[n - 1] == '\n') n--;
    size_t st = skip_ws(v, n, 0), e = st < n && v[st] != '"' ? scan_value(v, n, st, 0) : BAD;
    if (e != BAD && skip_ws(v, n, e) == n) buf_put(b, v + st, e - st);
    else json_string_encode(b, v, n);
}

/* <function=NAME><parameter=P>v</parameter>...</function> at s[i]; the
 * offset past it, or BAD. */
static size_t parse_xml_function(parse_state *ps, size_t i) {
    const char *s = ps->s;
    size_t n = ps->n;
    i += strlen("<function=");
    const char *gt = memchr(s + i, '>', n - i);
    if (!gt || gt == s + i) return BAD;
    size_t name_end = (size_t)(gt - s);
    tsr_buf args = {0};
    buf_putc(&args, '{');
    size_t j = skip_ws(s, n, name_end + 1);
    int n_params = 0;
    while (starts(s, n, j, "<parameter=")) {
        size_t p = j + strlen("<parameter=");
        const char *pgt = memchr(s + p, '>', n - p);
        const char *close = pgt ? find(s, n, (size_t)(pgt - s), "</parameter>") : NULL;
        if (!pgt || !close || pgt == s + p) {
            free(args.p);
            return BAD;
        }
        if (n_params++) buf_putc(&args, ',');
        json_string_encode(&args, s + p, (size_t)(pgt - s) - p);
        buf_putc(&args, ':');
        put_param_value(&args, pgt + 1, (size_t)(close - pgt - 1));
        j = skip_ws(s, n, (size_t)(close - s) + strlen("</parameter>"));
    }
    buf_putc(&args, '}');
    if (starts(s, n, j, "</function>")) j += strlen("</function>");
    else if (j < n) { /* something else inside the call */
        free(args.p);
        return BAD;
    }
    calls_push(&ps->calls, dup_n(s + i, name_end - i), buf_take(&args), NULL);
    return j;
}

/* Small models often end a call object one or two braces short before
 * </tool_call>: {"name": "f", "arguments": {"a": 1}</tool_call>. Accept it
 * when adding the braces makes a valid call; the offset of </tool_call>, or
 * BAD. */
static size_t parse_unclosed(parse_state *ps, size_t j) {
    const char *close = find(ps->s, ps->n, j, "</tool_call>");
    if (!close) return BAD;
    size_t end = (size_t)(close - ps->s);
    while (end > j && is_ws(ps->s[end - 1])) end--;
    for (int add = 1; add <= 2; add++) {
        char *t = malloc(end - j + 3);
        if (!t) {
            ps->calls.oom = true;
            return BAD;
        }
        memcpy(t, ps->s + j, end - j);
        memset(t + end - j, '}', (size_t)add);
        size_t n = end - j + (size_t)add, ve = scan_value(t, n, 0, 0);
        bool ok = ve == n && call_from_object(&ps->calls, t, 0, n);
        free(t);
        if (ok) return (size_t)(close - ps->s);
    }
    return BAD;
}

/* <tool_call> JSON or <function=...> </tool_call> blocks (hermes and
 * qwen3-coder write the same wrapper). */
static void parse_tagged(parse_state *ps) {
    const char *s = ps->s;
    size_t n = ps->n, i = 0;
    while (i < n) {
        const char *tc = find(s, n, i, "<tool_call>"), *fn = find(s, n, i, "<function=");
        const char *at = tc && (!fn || tc < fn) ? tc : fn;
        if (!at) break;
        size_t start = (size_t)(at - s);
        buf_put(&ps->content, s + i, start - i);
        size_t j = at == tc ? skip_ws(s, n, start + strlen("<tool_call>")) : start, e = BAD;
        if (starts(s, n, j, "<function=")) {
            e = parse_xml_function(ps, j);
        } else if (j < n && s[j] == '{') {
            size_t ve = scan_value(s, n, j, 0);
            if (ve != BAD && call_from_object(&ps->calls, s, j, ve)) e = ve;
            else if (ve == BAD && at == tc) e = parse_unclosed(ps, j);
        }
        if (e != BAD) {
            e = skip_ws(s, n, e);
            if (at == tc && starts(s, n, e, "</tool_call>")) e += strlen("</tool_call>");
            i = skip_ws(s, n, e);
            continue;
        }
        /* Not a call: keep its text, up to its close tag, as content. */
        const char *close = find(s, n, start + 1, at == tc ? "</tool_call>" : "</function>");
        size_t end = close ? (size_t)(close - s) + strlen(at == tc ? "</tool_call>" : "</function>") : n;
        buf_put(&ps->content, s + start, end - start);
        i = end;
    }
    if (i < n) buf_put(&ps->content, s + i, n - i);
}

/* Llama 3: [<|python_tag|>] {"name", "parameters"} [; {...}]... as the whole
 * output (after white space). */
static void parse_llama3(parse_state *ps) {
    const char *s = ps->s;
    size_t n = ps->n, i = skip_ws(s, n, 0);
    if (starts(s, n, i, "<|python_tag|>")) i = skip_ws(s, n, i + strlen("<|python_tag|>"));
    bool ok = i < n && s[i] == '{';
    while (ok && i < n) {
        size_t e = scan_value(s, n, i, 0);
        ok = e != BAD && call_from_object(&ps->calls, s, i, e);
        if (!ok) break;
        i = skip_ws(s, n, e);
        if (i < n && s[i] == ';') i = skip_ws(s, n, i + 1);
        if (i < n && s[i] != '{') ok = false;
    }
    if (!ok) {
        calls_drop(&ps->calls, 0);
        buf_put(&ps->content, s, n);
    }
}

/* Mistral: [TOOL_CALLS]NAME[ARGS]{...} (optionally [CALL_ID]id before
 * [ARGS]) or [TOOL_CALLS][{...}, ...]. */
static void parse_mistral(parse_state *ps) {
    const char *s = ps->s;
    size_t n = ps->n, i = 0;
    const char *at;
    while ((at = find(s, n, i, "[TOOL_CALLS]")) != NULL) {
        size_t start = (size_t)(at - s), j = skip_ws(s, n, start + strlen("[TOOL_CALLS]")), e = BAD;
        buf_put(&ps->content, s + i, start - i);
        if (j < n && s[j] == '[') {
            size_t ve = scan_value(s, n, j, 0);
            if (ve != BAD && calls_from_array(&ps->calls, s, j, ve)) e = ve;
        } else {
            const char *args = find(s, n, j, "[ARGS]");
            const char *cid = find(s, n, j, "[CALL_ID]");
            size_t name_end = args ? (size_t)(args - s) : BAD;
            char *id = NULL;
            if (cid && args && cid < args) {
                id = dup_n(cid + strlen("[CALL_ID]"), (size_t)(args - cid) - strlen("[CALL_ID]"));
                name_end = (size_t)(cid - s);
            }
            size_t va = args ? skip_ws(s, n, (size_t)(args - s) + strlen("[ARGS]")) : BAD;
            size_t ve = va != BAD ? scan_value(s, n, va, 0) : BAD;
            bool name_ok = name_end != BAD && name_end > j && !memchr(s + j, '[', name_end - j);
            char *a = ve != BAD && name_ok ? args_from_value(s, va, ve) : NULL;
            if (a) {
                calls_push(&ps->calls, dup_n(s + j, name_end - j), a, id);
                e = ve;
            } else {
                free(id);
            }
        }
        if (e == BAD) { /* keep it as text */
            const char *next = find(s, n, start + 1, "[TOOL_CALLS]");
            size_t end = next ? (size_t)(next - s) : n;
            buf_put(&ps->content, s + start, end - start);
            i = end;
            continue;
        }
        i = skip_ws(s, n, e);
    }
    if (i < n) buf_put(&ps->content, s + i, n - i);
}

/* Harmony (gpt-oss): messages [<|start|>assistant][ to=R]<|channel|>C[ to=R]
 * [<|constrain|>T]<|message|>BODY ended by <|end|>, <|call|>, <|return|> or
 * the end of the text. */
static void parse_harmony(parse_state *ps) {
    const char *s = ps->s;
    size_t n = ps->n, i = 0;
    if (!find(s, n, 0, "<|channel|>") && !find(s, n, 0, "<|message|>")) {
        buf_put(&ps->content, s, n);
        return;
    }
    while (i < n) {
        const char *msg = find(s, n, i, "<|message|>");
        if (!msg) break;
        size_t hs = i, he = (size_t)(msg - s), body = he + strlen("<|message|>"), end = n, next = n;
        static const char *const ends[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
        for (size_t k = 0; k < 4; k++) {
            const char *e = find(s, n, body, ends[k]);
            if (e && (size_t)(e - s) < end) {
                end = (size_t)(e - s);
                next = end + (k < 3 ? strlen(ends[k]) : 0);
            }
        }
        const char *ch = find(s, he, hs, "<|channel|>");
        size_t cs = ch ? (size_t)(ch - s) + strlen("<|channel|>") : he, ce = cs;
        while (ce < he && s[ce] != ' ' && s[ce] != '<') ce++;
        const char *to = find(s, he, hs, "to=functions.");
        if (to) {
            size_t na = (size_t)(to - s) + strlen("to=functions."), nb = na;
            while (nb < he && s[nb] != ' ' && s[nb] != '<') nb++;
            size_t va = skip_ws(s, end, body), ve = scan_value(s, end, va, 0);
            char *args = ve != BAD && skip_ws(s, end, ve) == end ? args_from_value(s, va, ve) : NULL;
            if (nb > na && args) calls_push(&ps->calls, dup_n(s + na, nb - na), args, NULL);
            else {
                free(args);
                buf_put(&ps->content, s + body, end - body);
            }
        } else if (ce - cs == 8 && !memcmp(s + cs, "analysis", 8)) {
            buf_put(&ps->reasoning, s + body, end - body);
        } else {
            buf_put(&ps->content, s + body, end - body);
        }
        i = next;
        if (starts(s, n, i, "<|start|>")) i += strlen("<|start|>");
    }
}

static bool name_known(const char *name, const char *const *known, size_t n_known) {
    for (size_t i = 0; i < n_known; i++)
        if (known[i] && !strcmp(known[i], name)) return true;
    return false;
}

/* Generic: the whole output (optionally in a ```json fence) is one JSON
 * value naming known tools. True when it was. */
static bool parse_generic(parse_state *ps, const char *const *known, size_t n_known) {
    const char *s = ps->s;
    size_t n = ps->n, i = skip_ws(s, n, 0);
    if (starts(s, n, i, "```")) {
        i += 3;
        if (starts(s, n, i, "json")) i += 4;
        i = skip_ws(s, n, i);
        size_t t = n;
        while (t > i && is_ws(s[t - 1])) t--;
        if (t < i + 3 || memcmp(s + t - 3, "```", 3)) return false;
        n = t - 3;
    }
    size_t e = i < n ? scan_value(s, n, i, 0) : BAD;
    if (e == BAD || skip_ws(s, n, e) != n) return false;
    calls c = {0};
    size_t va, vb;
    bool ok;
    if (s[i] == '[') ok = calls_from_array(&c, s, i, e);
    else if (s[i] != '{') ok = false;
    else if (json_get(s, i, e, "tool_calls", &va, &vb)) ok = s[va] == '[' && calls_from_array(&c, s, va, vb);
    else if (json_get(s, i, e, "tool_call", &va, &vb)) ok = call_from_object(&c, s, va, vb);
    else ok = call_from_object(&c, s, i, e);
    for (size_t k = 0; ok && k < c.n; k++) ok = name_known(c.v[k].name, known, n_known);
    if (!ok || c.oom) {
        ps->calls.oom |= c.oom;
        calls_drop(&c, 0);
        free(c.v);
        return false;
    }
    calls_drop(&ps->calls, 0);
    free(ps->calls.v);
    ps->calls = c;
    free(ps->content.p);
    ps->content = (tsr_buf){0};
    return true;
}

/* ------------------------------------------------------ public */

chat_tool_format chat_tool_format_detect(const char *t) {
    if (!t) return TESSERA_TOOLS_GENERIC;
    if (strstr(t, "<|channel|>") && strstr(t, "<|call|>")) return TESSERA_TOOLS_HARMONY;
    if (strstr(t, "<function=") && strstr(t, "<parameter=")) return TESSERA_TOOLS_QWEN3_CODER;
    if (strstr(t, "<tool_call>")) return TESSERA_TOOLS_HERMES;
    if (strstr(t, "[TOOL_CALLS]")) return TESSERA_TOOLS_MISTRAL;
    if (strstr(t, "<|start_header_id|>") && strstr(t, "\"parameters\"")) return TESSERA_TOOLS_LLAMA3;
    return TESSERA_TOOLS_GENERIC;
}

const char *chat_tool_format_name(chat_tool_format f) {
    switch (f) {
    case TESSERA_TOOLS_HERMES: return "hermes";
    case TESSERA_TOOLS_LLAMA3: return "llama3";
    case TESSERA_TOOLS_MISTRAL: return "mistral";
    case TESSERA_TOOLS_QWEN3_CODER: return "qwen3-coder";
    case TESSERA_TOOLS_HARMONY: return "harmony";
    case TESSERA_TOOLS_GENERIC: break;
    }
    return "generic";
}

static void trim(tsr_buf *b) {
    if (!b->p) return;
    size_t a = skip_ws(b->p, b->len, 0), e = b->len;
    while (e > a && is_ws(b->p[e - 1])) e--;
    memmove(b->p, b->p + a, e - a);
    b->len = e - a;
    b->p[b->len] = '\0';
}

int chat_tool_parse(chat_tool_format f, const char *text, size_t len, const char *const *known,
                    size_t n_known, chat_parsed *out) {
    memset(out, 0, sizeof *out);
    parse_state ps = {.s = text ? text : "", .n = text ? len : 0};
    switch (f) {
    case TESSERA_TOOLS_HERMES:
    case TESSERA_TOOLS_QWEN3_CODER: parse_tagged(&ps); break;
    case TESSERA_TOOLS_LLAMA3: parse_llama3(&ps); break;
    case TESSERA_TOOLS_MISTRAL: parse_mistral(&ps); break;
    case TESSERA_TOOLS_HARMONY: parse_harmony(&ps); break;
    case TESSERA_TOOLS_GENERIC: buf_put(&ps.content, ps.s, ps.n); break;
    }
    if (ps.calls.n == 0 && !ps.calls.oom) parse_generic(&ps, known, n_known);
    if (ps.calls.n > 0) trim(&ps.content);
    out->content = buf_take(&ps.content);
    out->reasoning = ps.reasoning.p || ps.reasoning.oom ? buf_take(&ps.reasoning) : NULL;
    out->calls = ps.calls.v;
    out->n_calls = ps.calls.n;
    if (!out->content || ps.calls.oom || (ps.reasoning.p && !out->reasoning)) {
        chat_parsed_free(out);
        return error_set("tool calls: out of memory parsing %zu bytes of output", len);
    }
    return 0;
}

void chat_parsed_free(chat_parsed *p) {
    if (!p) return;
    calls c = {.v = p->calls, .n = p->n_calls};
    calls_drop(&c, 0);
    free(p->calls);
    free(p->content);
    free(p->reasoning);
    memset(p, 0, sizeof *p);
}

/* The earliest offset where one of the markers starts in s, or where a tail
 * of s is a proper prefix of one; n if neither. */
static size_t marker_hold(const char *s, size_t n, const char *const *markers, size_t n_markers) {
    size_t hold = n;
    for (size_t m = 0; m < n_markers; m++) {
        const char *at = find(s, n, 0, markers[m]);
        if (at && (size_t)(at - s) < hold) hold = (size_t)(at - s);
        size_t k = strlen(markers[m]);
        for (size_t t = k - 1 < n ? k - 1 : n; t > 0; t--)
            if (!memcmp(s + n - t, markers[m], t)) {
                if (n - t < hold) hold = n - t;
                break;
            }
    }
    return hold;
}

size_t chat_tool_hold_from(chat_tool_format f, const char *s, size_t n) {
    if (!s) return 0;
    size_t first = skip_ws(s, n, 0);
    /* Bare JSON (llama3, the generic fallback of every format) and fences
     * start the output; so does harmony's first channel. */
    if (first == n || s[first] == '{' || s[first] == '[' || s[first] == '`' || f == TESSERA_TOOLS_HARMONY)
        return 0;
    static const char *const tagged[] = {"<tool_call>", "<function="};
    static const char *const mistral[] = {"[TOOL_CALLS]"};
    static const char *const llama3[] = {"<|python_tag|>"};
    switch (f) {
    case TESSERA_TOOLS_HERMES:
    case TESSERA_TOOLS_QWEN3_CODER: return marker_hold(s, n, tagged, 2);
    case TESSERA_TOOLS_MISTRAL: return marker_hold(s, n, mistral, 1);
    case TESSERA_TOOLS_LLAMA3: return marker_hold(s, n, llama3, 1);
    default: return n;
    }
}
