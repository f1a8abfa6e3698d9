import java.util.List;

import org.tessera.ChatMessage;
import org.tessera.Model;
import org.tessera.Session;
import org.tessera.Tessera;

/**
 * Stream an answer, then a JSON-schema answer. After `meson install`:
 *
 *   javac -cp PREFIX/share/java/tessera-java.jar Example.java
 *   java -cp PREFIX/share/java/tessera-java.jar:. -Djava.library.path=PREFIX/LIBDIR Example MODEL.gguf
 *
 * (libtessera_jni.so finds the plugins in LIBDIR/tessera by itself.)
 */
public class Example {
    public static void main(String[] args) {
        Tessera.init();
        try (Model model = new Model(args[0]);
             Session session = model.newSession(2048)) {
            session.chat(List.of(ChatMessage.user("What is the capital of France?")),
                    new Session.Options().maxTokens(32).temperature(0), piece -> {
                        System.out.print(piece);
                        return true; // false stops; session.cancel() does too, from any thread
                    });
            System.out.println();
            String schema = "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
                    + " \"required\": [\"city\"], \"additionalProperties\": false}";
            ChatMessage json = session.chat(List.of(ChatMessage.user("Which city is the capital of France?")),
                    new Session.Options().maxTokens(32).temperature(0).jsonSchema(schema), null);
            System.out.println("json: " + json.content());
        }
    }
}
