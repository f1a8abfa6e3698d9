package org.tessera;

import java.util.Objects;

/**
 * A function the model may call: its name, what it does, and its
 * parameters as a JSON Schema (JSON text), given to the chat template as
 * OpenAI's {"type": "function", "function": {...}}.
 */
public final class Tool {
    private final String name, description, parameters;

    /**
     * @param parameters JSON Schema of the arguments object (JSON text), or
     *                   null for any object
     */
    public Tool(@NonNull String name, @Nullable String description, @Nullable String parameters) {
        this.name = Objects.requireNonNull(name, "name");
        this.description = description;
        if (parameters != null && !Json.isObject(parameters))
            throw new IllegalArgumentException("parameters is not a JSON object: " + parameters);
        this.parameters = parameters;
    }

    public @NonNull String name() { return name; }
    public @Nullable String description() { return description; }
    /** The JSON Schema text, or null. */
    public @Nullable String parameters() { return parameters; }

    /** {"type": "function", "function": {...}} */
    String toJson() {
        StringBuilder b = new StringBuilder("{\"type\":\"function\",\"function\":{\"name\":").append(Json.quote(name));
        if (description != null) b.append(",\"description\":").append(Json.quote(description));
        b.append(",\"parameters\":").append(parameters != null ? parameters : "{\"type\":\"object\"}");
        return b.append("}}").toString();
    }

    /** The schema of a call {"name", "arguments"} to this tool (a forced call's grammar). */
    String callSchema() {
        return "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":" + Json.quote(name) + "},\"arguments\":"
                + (parameters != null ? parameters : "{\"type\":\"object\"}")
                + "},\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}";
    }

    @Override
    public String toString() { return "Tool(" + name + ")"; }
}
