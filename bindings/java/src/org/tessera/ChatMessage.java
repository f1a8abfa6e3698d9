package org.tessera;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * One message of a conversation: a role ("system", "user", "assistant",
 * "tool"), its text, and for an assistant the tools it called, for a tool
 * the call it answers. Immutable. {@link Session#chat} returns the
 * assistant's reply as one, its tool calls parsed; put it back in the list
 * with the tools' answers to go on. A message may carry images ({@link
 * #user(String, Image...)}) for a model loaded with a projector: they go
 * before its text, or where the text has a {@code <__media__>} marker for
 * each.
 */
public final class ChatMessage {
    private final String role, content, toolCallId, reasoning;
    private final List<ToolCall> toolCalls;
    private final List<Image> images;

    /** llama.cpp's media marker: where an image goes in a message's text. */
    public static final String MEDIA_MARKER = "<__media__>";

    public ChatMessage(@NonNull String role, @Nullable String content) {
        this(role, content, null, null, null);
    }

    /**
     * @param toolCalls  an assistant's calls (null: none)
     * @param toolCallId for role "tool": the id of the call it answers
     * @param reasoning  an assistant's reasoning (thinking) text, or null
     */
    public ChatMessage(@NonNull String role, @Nullable String content, @Nullable List<ToolCall> toolCalls,
                       @Nullable String toolCallId, @Nullable String reasoning) {
        this(role, content, toolCalls, toolCallId, reasoning, null);
    }

    /**
     * @param images images shown with the text (null: none): before it, or
     *               at its {@link #MEDIA_MARKER}s when it has one per image
     */
    public ChatMessage(@NonNull String role, @Nullable String content, @Nullable List<ToolCall> toolCalls,
                       @Nullable String toolCallId, @Nullable String reasoning, @Nullable List<Image> images) {
        List<Image> imgs = new ArrayList<>();
        if (images != null)
            for (int i = 0; i < images.size(); i++) imgs.add(Objects.requireNonNull(images.get(i), "images[" + i + "]"));
        this.images = Collections.unmodifiableList(imgs);
        this.role = Objects.requireNonNull(role, "role");
        this.content = content;
        List<ToolCall> calls = new ArrayList<>();
        if (toolCalls != null)
            for (ToolCall c : toolCalls) calls.add(Objects.requireNonNull(c, "toolCalls[i]"));
        this.toolCalls = Collections.unmodifiableList(calls);
        this.toolCallId = toolCallId;
        this.reasoning = reasoning;
    }

    public static @NonNull ChatMessage system(@NonNull String content) {
        return new ChatMessage("system", Objects.requireNonNull(content, "content"));
    }

    public static @NonNull ChatMessage user(@NonNull String content) {
        return new ChatMessage("user", Objects.requireNonNull(content, "content"));
    }

    /** A user's message showing images (for a model loaded with a projector) and text. */
    public static @NonNull ChatMessage user(@NonNull String content, @NonNull Image... images) {
        Objects.requireNonNull(images, "images");
        return new ChatMessage("user", Objects.requireNonNull(content, "content"), null, null, null,
                java.util.Arrays.asList(images));
    }

    public static @NonNull ChatMessage assistant(@NonNull String content) {
        return new ChatMessage("assistant", Objects.requireNonNull(content, "content"));
    }

    /** A tool's answer to the call with id toolCallId (may be null when the call had none). */
    public static @NonNull ChatMessage tool(@Nullable String toolCallId, @NonNull String content) {
        return new ChatMessage("tool", Objects.requireNonNull(content, "content"), null, toolCallId, null);
    }

    public @NonNull String role() { return role; }
    /** The text; null for an assistant message that only calls tools. */
    public @Nullable String content() { return content; }
    /** The tool calls (empty when none); unmodifiable. */
    public @NonNull List<ToolCall> toolCalls() { return toolCalls; }
    public @Nullable String toolCallId() { return toolCallId; }
    public @Nullable String reasoning() { return reasoning; }
    /** The images (empty when none); unmodifiable. */
    public @NonNull List<Image> images() { return images; }

    /** The text the template gets: a marker where each image goes. */
    String templateContent() {
        String text = content != null ? content : "";
        if (images.isEmpty() || markers(text) == images.size()) return text;
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < images.size(); i++) b.append(MEDIA_MARKER);
        return b.append(text).toString();
    }

    static int markers(String text) {
        int n = 0;
        for (int at = text.indexOf(MEDIA_MARKER); at >= 0; at = text.indexOf(MEDIA_MARKER, at + MEDIA_MARKER.length())) n++;
        return n;
    }

    /** As chat templates take it: content "" rather than null, arguments as objects. */
    String toJson() {
        StringBuilder b = new StringBuilder("{\"role\":").append(Json.quote(role));
        b.append(",\"content\":").append(Json.quote(templateContent()));
        if (!toolCalls.isEmpty()) {
            b.append(",\"tool_calls\":[");
            for (int i = 0; i < toolCalls.size(); i++) b.append(i > 0 ? "," : "").append(toolCalls.get(i).toJson());
            b.append(']');
        }
        if (toolCallId != null) b.append(",\"tool_call_id\":").append(Json.quote(toolCallId));
        if (reasoning != null) b.append(",\"reasoning_content\":").append(Json.quote(reasoning));
        return b.append('}').toString();
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof ChatMessage)) return false;
        ChatMessage m = (ChatMessage) o;
        return role.equals(m.role) && Objects.equals(content, m.content) && toolCalls.equals(m.toolCalls)
                && Objects.equals(toolCallId, m.toolCallId) && Objects.equals(reasoning, m.reasoning)
                && images.equals(m.images);
    }

    @Override
    public int hashCode() { return Objects.hash(role, content, toolCalls, toolCallId, reasoning, images); }

    @Override
    public String toString() {
        return role + ": " + (content != null ? content : "") + (toolCalls.isEmpty() ? "" : " " + toolCalls)
                + (images.isEmpty() ? "" : " " + images);
    }
}
