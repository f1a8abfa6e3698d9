package org.tessera;

import java.util.Map;
import java.util.Objects;

/** A call of a {@link Tool} in an assistant's {@link ChatMessage}. */
public final class ToolCall {
    private final String id, name, arguments;

    /**
     * @param id        the call's id (a tool message answers it), or null
     * @param arguments the arguments object as JSON text
     */
    public ToolCall(@Nullable String id, @NonNull String name, @NonNull String arguments) {
        this.id = id;
        this.name = Objects.requireNonNull(name, "name");
        this.arguments = Objects.requireNonNull(arguments, "arguments");
    }

    public @Nullable String id() { return id; }
    public @NonNull String name() { return name; }
    /** The arguments as JSON text: "{\"city\": \"Paris\"}". */
    public @NonNull String arguments() { return arguments; }

    /**
     * The arguments parsed: a Map of String to String, Double, Boolean,
     * List, Map or null. IllegalArgumentException when they are not a JSON
     * object.
     */
    @SuppressWarnings("unchecked")
    public @NonNull Map<String, Object> argumentsMap() {
        Object v = Json.parse(arguments);
        if (!(v instanceof Map)) throw new IllegalArgumentException("arguments are not a JSON object: " + arguments);
        return (Map<String, Object>) v;
    }

    /** {"id", "type": "function", "function": {"name", "arguments"}}, the arguments as an object for templates. */
    String toJson() {
        StringBuilder b = new StringBuilder("{");
        if (id != null) b.append("\"id\":").append(Json.quote(id)).append(',');
        b.append("\"type\":\"function\",\"function\":{\"name\":").append(Json.quote(name)).append(",\"arguments\":");
        b.append(Json.isObject(arguments) ? arguments : Json.quote(arguments));
        return b.append("}}").toString();
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof ToolCall)) return false;
        ToolCall c = (ToolCall) o;
        return Objects.equals(id, c.id) && name.equals(c.name) && arguments.equals(c.arguments);
    }

    @Override
    public int hashCode() { return Objects.hash(id, name, arguments); }

    @Override
    public String toString() { return name + arguments; }
}
