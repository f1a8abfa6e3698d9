package org.tessera;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The little JSON the binding needs (no dependency): quoting strings for the
 * chat template's variables, and reading the engine's parsed replies and a
 * tool call's arguments. Values: Map (ordered), List, String, Double,
 * Boolean, null.
 */
final class Json {
    private final String s;
    private int i;

    private Json(String s) { this.s = s; }

    /** text as a JSON string literal. */
    static String quote(String text) {
        StringBuilder b = new StringBuilder(text.length() + 2).append('"');
        for (int k = 0; k < text.length(); k++) {
            char c = text.charAt(k);
            switch (c) {
            case '"': b.append("\\\""); break;
            case '\\': b.append("\\\\"); break;
            case '\n': b.append("\\n"); break;
            case '\r': b.append("\\r"); break;
            case '\t': b.append("\\t"); break;
            default:
                if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    /** The value of JSON text; IllegalArgumentException when it is not JSON. */
    static Object parse(String text) {
        Json p = new Json(text);
        Object v = p.value();
        p.ws();
        if (p.i != text.length()) throw p.error("trailing text");
        return v;
    }

    /** Whether text is a JSON object. */
    static boolean isObject(String text) {
        try {
            return parse(text) instanceof Map;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("JSON: " + what + " at offset " + i);
    }

    private void ws() {
        while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) i++;
    }

    private Object value() {
        ws();
        if (i >= s.length()) throw error("unexpected end");
        char c = s.charAt(i);
        switch (c) {
        case '{': {
            i++;
            Map<String, Object> m = new LinkedHashMap<>();
            ws();
            if (i < s.length() && s.charAt(i) == '}') { i++; return m; }
            while (true) {
                ws();
                if (i >= s.length() || s.charAt(i) != '"') throw error("expected a key");
                String k = string();
                ws();
                if (i >= s.length() || s.charAt(i) != ':') throw error("expected ':'");
                i++;
                m.put(k, value());
                ws();
                if (i < s.length() && s.charAt(i) == ',') { i++; continue; }
                if (i < s.length() && s.charAt(i) == '}') { i++; return m; }
                throw error("expected ',' or '}'");
            }
        }
        case '[': {
            i++;
            List<Object> l = new ArrayList<>();
            ws();
            if (i < s.length() && s.charAt(i) == ']') { i++; return l; }
            while (true) {
                l.add(value());
                ws();
                if (i < s.length() && s.charAt(i) == ',') { i++; continue; }
                if (i < s.length() && s.charAt(i) == ']') { i++; return l; }
                throw error("expected ',' or ']'");
            }
        }
        case '"': return string();
        case 't': return word("true", Boolean.TRUE);
        case 'f': return word("false", Boolean.FALSE);
        case 'n': return word("null", null);
        default: return number();
        }
    }

    private Object word(String w, Object v) {
        if (!s.startsWith(w, i)) throw error("unexpected character");
        i += w.length();
        return v;
    }

    private Double number() {
        int start = i;
        while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
        try {
            return Double.valueOf(s.substring(start, i));
        } catch (NumberFormatException e) {
            i = start;
            throw error("bad value");
        }
    }

    private String string() {
        i++; /* the quote */
        StringBuilder b = new StringBuilder();
        while (true) {
            if (i >= s.length()) throw error("unterminated string");
            char c = s.charAt(i++);
            if (c == '"') return b.toString();
            if (c != '\\') { b.append(c); continue; }
            if (i >= s.length()) throw error("unterminated string");
            char e = s.charAt(i++);
            switch (e) {
            case 'n': b.append('\n'); break;
            case 't': b.append('\t'); break;
            case 'r': b.append('\r'); break;
            case 'b': b.append('\b'); break;
            case 'f': b.append('\f'); break;
            case 'u':
                if (i + 4 > s.length()) throw error("bad \\u escape");
                try {
                    b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                } catch (NumberFormatException x) {
                    throw error("bad \\u escape");
                }
                i += 4;
                break;
            default: b.append(e);
            }
        }
    }
}
