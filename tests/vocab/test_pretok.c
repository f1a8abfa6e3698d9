/*
 * test_pretok — the BPE pre-tokenizers.
 *
 *   - every tokenizer.ggml.pre name llama.cpp knows (pretok_table.h) compiles
 *     under PCRE2, and its words always cover the input exactly;
 *   - an unknown name is an error listing the known ones;
 *   - for 25 common names, the words of three mixed texts (contractions,
 *     digits runs, CJK, emoji, code, whitespace runs, Cyrillic, case changes)
 *     equal the reference below, produced by Python's `regex` module running
 *     the same regexes with llama.cpp's piece-by-piece split;
 *   - invalid UTF-8 bytes become U+FFFD (one per byte), never a crash;
 *   - 256 KB runs of one letter split without hitting PCRE2's limits.
 */
#include "test_util.h"
#include "vocab/pretok_table.h"
#include "vocab/utf8.h"
#include "vocab/vocab_internal.h"

static const char *const texts[] = {
    "Hello, y'all! How are you \xf0\x9f\x98\x81 ?\xe6\x88\x91\xe6\x83\xb3\xe5\x9c\xa8" "apple"
    "\xe5\xb7\xa5\xe4\xbd\x9c" "1314151\xe5\xa4\xa9\xef\xbd\x9e",
    "  \n\n\tdef f(x):\n    return x**2 + 1_000_000 # $100 <=> ~|`\n",
    "I'VE don't We'Ve a'lL \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82\xd0\x9c\xd0\xb8\xd1\x80"
    " HelloWorld helloWORLD \xc3\x89" "coleNormale 12345 \xd9\xa1\xd9\xa2\xd9\xa3 \xc2\xbd",
};

/* Words joined by \x01 (raw bytes, before GPT-2 byte mapping). */
static const struct {
    const char *name;
    int text;
    const char *words;
} expected[] = {
    {"gpt-2", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1314151\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"gpt-2", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" 1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"gpt-2", 2, "I\x01""'\x01""VE\x01"" don\x01""'t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" 12345\x01"" \xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \xc2""\xbd"""},
    {"llama-bpe", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""131\x01""415\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"llama-bpe", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" ~|`\x0a"""},
    {"llama-bpe", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""123\x01""45\x01"" \x01""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"qwen2", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"qwen2", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x0a"""},
    {"qwen2", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"deepseek-coder", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""\x01""apple\x01""\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"deepseek-coder", 1, "  \x01""\x0a""\x01""\x0a""\x01""\x09""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" + \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=> ~|`\x01""\x0a"""},
    {"deepseek-coder", 2, "I\x01""'\x01""VE\x01"" don\x01""'\x01""t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"deepseek-llm", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""\x01""apple\x01""\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1314151\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"deepseek-llm", 1, "  \x01""\x0a""\x01""\x0a""\x01""\x09""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"deepseek-llm", 2, "I\x01""'\x01""VE\x01"" don\x01""'\x01""t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""\x01""coleNormale\x01"" \x01""12345\x01"" \x01""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"deepseek-v3", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""\x01""apple\x01""\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""131\x01""415\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"deepseek-v3", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" \x01""~\x01""|`\x0a"""},
    {"deepseek-v3", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""123\x01""45\x01"" \x01""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"falcon", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" \x01""?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""131\x01""415\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"falcon", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" \x01""+\x01"" 1\x01""_\x01""000\x01""_\x01""000\x01"" \x01""#\x01"" \x01""$\x01""100\x01"" \x01""<=>\x01"" \x01""~|`\x01""\x0a"""},
    {"falcon", 2, "I\x01""'\x01""VE\x01"" don\x01""'\x01""t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""123\x01""45\x01"" \xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \xc2""\xbd"""},
    {"starcoder", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"starcoder", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"starcoder", 2, "I\x01""'\x01""VE\x01"" don\x01""'t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"default", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" \x01""?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""131\x01""415\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"default", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" \x01""+\x01"" \x01""1\x01""_\x01""000\x01""_\x01""000\x01"" \x01""#\x01"" \x01""$\x01""100\x01"" \x01""<=>\x01"" \x01""~|\x01""`\x01""\x0a"""},
    {"default", 2, "I\x01""'\x01""VE\x01"" don\x01""'\x01""t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""123\x01""45\x01"" \x01""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"tekken", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"tekken", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x0a"""},
    {"tekken", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'l\x01""L\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" Hello\x01""World\x01"" hello\x01""WORLD\x01"" \xc3""\x89""cole\x01""Normale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"gpt-4o", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""131\x01""415\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"gpt-4o", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" ~|`\x0a"""},
    {"gpt-4o", 2, "I'VE\x01"" don't\x01"" We'Ve\x01"" a'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" Hello\x01""World\x01"" hello\x01""WORLD\x01"" \xc3""\x89""cole\x01""Normale\x01"" \x01""123\x01""45\x01"" \x01""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"poro-chat", 0, "Hello\x01"",\x01"" y'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""1314151\xe5""\xa4""\xa9""\xef""\xbd""\x9e"""},
    {"poro-chat", 1, "  \x0a""\x0a""\x09""\x01""def\x01"" f\x01""(\x01""x\x01"")\x01"":\x01""\x0a""   \x01"" return\x01"" x**2\x01"" +\x01"" 1_000_000\x01"" #\x01"" $100\x01"" <=>\x01"" ~\x01""|\x01""`\x01""\x0a"""},
    {"poro-chat", 2, "I'VE\x01"" don't\x01"" We'Ve\x01"" a'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" 12345\x01"" \xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \xc2""\xbd"""},
    {"viking", 0, "Hello\x01"",\x01"" y'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\xef""\xbd""\x9e"""},
    {"viking", 1, "  \x0a""\x0a""\x09""\x01""def\x01"" f\x01""(\x01""x\x01"")\x01"":\x01""\x0a""   \x01"" return\x01"" x**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~\x01""|\x01""`\x01""\x0a"""},
    {"viking", 2, "I'VE\x01"" don't\x01"" We'Ve\x01"" a'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"chatglm-bpe", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""131\x01""415\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"chatglm-bpe", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" ~|`\x0a"""},
    {"chatglm-bpe", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""123\x01""45\x01"" \x01""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"bailingmoe", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"bailingmoe", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x0a"""},
    {"bailingmoe", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"exaone-moe", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How are you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"exaone-moe", 1, "  \x0a""\x0a""\x01""\x09""def f\x01""(x\x01""):\x0a""\x01""   \x01"" return x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x0a"""},
    {"exaone-moe", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80"" HelloWorld helloWORLD \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"seed-coder", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"seed-coder", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x01""\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"seed-coder", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"smollm", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"smollm", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"smollm", 2, "I\x01""'\x01""VE\x01"" don\x01""'t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"command-r", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"command-r", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"command-r", 2, "I\x01""'\x01""VE\x01"" don\x01""'t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"dbrx", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""131\x01""415\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"dbrx", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" ~|`\x0a"""},
    {"dbrx", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""123\x01""45\x01"" \x01""\xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"stablelm2", 0, "Hello\x01"",\x01"" y\x01""'all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"stablelm2", 1, "  \x0a""\x0a""\x01""\x09""def\x01"" f\x01""(x\x01""):\x0a""\x01""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x0a"""},
    {"stablelm2", 2, "I\x01""'VE\x01"" don\x01""'t\x01"" We\x01""'Ve\x01"" a\x01""'lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
    {"olmo", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1314151\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"olmo", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" 1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"olmo", 2, "I\x01""'\x01""VE\x01"" don\x01""'t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" 12345\x01"" \xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \xc2""\xbd"""},
    {"jais", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1314151\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"jais", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" 1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"jais", 2, "I\x01""'\x01""VE\x01"" don\x01""'t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" 12345\x01"" \xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \xc2""\xbd"""},
    {"mpt", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1314151\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"mpt", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" 1\x01""_\x01""000\x01""_\x01""000\x01"" #\x01"" $\x01""100\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"mpt", 2, "I\x01""'\x01""VE\x01"" don\x01""'t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" 12345\x01"" \xd9""\xa1""\xd9""\xa2""\xd9""\xa3""\x01"" \xc2""\xbd"""},
    {"refact", 0, "Hello\x01"",\x01"" y\x01""'\x01""all\x01""!\x01"" How\x01"" are\x01"" you\x01"" \xf0""\x9f""\x98""\x81""\x01"" ?\x01""\xe6""\x88""\x91""\xe6""\x83""\xb3""\xe5""\x9c""\xa8""apple\xe5""\xb7""\xa5""\xe4""\xbd""\x9c""\x01""1\x01""3\x01""1\x01""4\x01""1\x01""5\x01""1\x01""\xe5""\xa4""\xa9""\x01""\xef""\xbd""\x9e"""},
    {"refact", 1, "  \x0a""\x0a""\x01""\x09""\x01""def\x01"" f\x01""(\x01""x\x01""):\x01""\x0a""   \x01"" return\x01"" x\x01""**\x01""2\x01"" +\x01"" \x01""1\x01""_\x01""0\x01""0\x01""0\x01""_\x01""0\x01""0\x01""0\x01"" #\x01"" $\x01""1\x01""0\x01""0\x01"" <=>\x01"" ~|`\x01""\x0a"""},
    {"refact", 2, "I\x01""'\x01""VE\x01"" don\x01""'t\x01"" We\x01""'\x01""Ve\x01"" a\x01""'\x01""lL\x01"" \xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""\xd0""\x9c""\xd0""\xb8""\xd1""\x80""\x01"" HelloWorld\x01"" helloWORLD\x01"" \xc3""\x89""coleNormale\x01"" \x01""1\x01""2\x01""3\x01""4\x01""5\x01"" \x01""\xd9""\xa1""\x01""\xd9""\xa2""\x01""\xd9""\xa3""\x01"" \x01""\xc2""\xbd"""},
};

/* The words of text under pre-tokenizer p, decoded back to raw bytes (unless
 * the family keeps raw UTF-8) and joined by \x01. */
static char *split_joined_as(pretok *p, const char *text, size_t len, bool raw) {
    vocab_words w = {0};
    if (pretok_split(p, text, len, &w)) return NULL;
    char *out = malloc(w.len + w.n + 1);
    size_t n = 0, start = 0;
    for (size_t i = 0; i < w.n; i++) {
        if (i) out[n++] = '\x01';
        if (raw) {
            memcpy(out + n, w.buf + start, w.ends[i] - start);
            n += w.ends[i] - start;
        }
        for (size_t off = start; !raw && off < w.ends[i];) {
            int b = gpt2_cpt_to_byte(utf8_decode(w.buf, w.ends[i], &off));
            out[n++] = (char)b;
        }
        start = w.ends[i];
    }
    out[n] = '\0';
    vocab_words_free(&w);
    return out;
}

static char *split_joined(pretok *p, const char *text, size_t len) {
    return split_joined_as(p, text, len, false);
}

static void strip_sep(char *s) {
    size_t n = 0;
    for (size_t i = 0; s[i]; i++)
        if (s[i] != '\x01') s[n++] = s[i];
    s[n] = '\0';
}

/* Every name compiles, and its words cover the text. */
TEST(test_names) {
    size_t n_names = sizeof pretok_names / sizeof pretok_names[0];
    for (size_t k = 0; k < n_names; k++) {
        pretok_info info;
        pretok *p = pretok_new(pretok_names[k].name, &info);
        EXPECT(p != NULL, "%s: %s", pretok_names[k].name, error_get());
        EXPECT(pretok_regexes[pretok_names[k].family][0] != NULL, "%s has no regex",
               pretok_names[k].name);
        if (!p) continue;
        for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
            char *joined = split_joined_as(p, texts[t], strlen(texts[t]), info.spm_style);
            EXPECT(joined != NULL, "%s: split failed: %s", pretok_names[k].name, error_get());
            if (!joined) continue;
            strip_sep(joined);
            EXPECT(strcmp(joined, texts[t]) == 0, "%s: words of text %zu do not cover it",
                   pretok_names[k].name, t);
            free(joined);
        }
        pretok_free(p);
    }
    printf("%zu pre-tokenizer names compile and cover their input\n", n_names);
}

/* llama.cpp's splits of the texts. */
TEST(test_reference_splits) {
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        pretok_info info;
        pretok *p = pretok_new(expected[i].name, &info);
        if (!p) continue; /* reported by test_names */
        const char *text = texts[expected[i].text];
        char *got = split_joined(p, text, strlen(text));
        bool same = got && strcmp(got, expected[i].words) == 0;
        if (!same) {
            ADD_FAILURE("%s text %d: the words differ", expected[i].name, expected[i].text);
            fprintf(stderr, "  want ");
            print_escaped(stderr, expected[i].words, strlen(expected[i].words));
            fprintf(stderr, "\n  got  ");
            if (got) print_escaped(stderr, got, strlen(got));
            fprintf(stderr, "\n");
        }
        free(got);
        pretok_free(p);
    }
    printf("%zu reference splits checked\n", sizeof expected / sizeof expected[0]);
}

TEST(test_long_runs) {
    /* Long runs of one letter: the case-splitting families (tekken, gpt-4o)
     * once ran into PCRE2's match limit here. */
    static const char *const heavy[] = {"tekken", "gpt-4o", "granite-embed-multi-97m", "llama-bpe"};
    size_t run = 256 * 1024;
    char *letters = malloc(run);
    for (size_t h = 0; h < sizeof heavy / sizeof heavy[0]; h++) {
        pretok_info hi;
        pretok *hp = pretok_new(heavy[h], &hi);
        for (int c = 0; c < 2 && hp; c++) {
            memset(letters, c ? 'a' : 'A', run);
            vocab_words hw = {0};
            EXPECT(pretok_split(hp, letters, run, &hw) == 0 && hw.n == 1,
                   "%s: a run of %zu '%c' is one word: %s", heavy[h], run, c ? 'a' : 'A',
                   error_get());
            vocab_words_free(&hw);
        }
        pretok_free(hp);
    }
    free(letters);
}

TEST(test_errors) {
    /* Unknown name: an error that names it and lists known ones. */
    pretok_info info;
    pretok *bad = pretok_new("no-such-pre", &info);
    EXPECT(bad == NULL, "unknown name accepted");
    EXPECT(strstr(error_get(), "no-such-pre") && strstr(error_get(), "llama-bpe") &&
              strstr(error_get(), "tokenizer.ggml.pre"),
           "error does not name the key, the value and the known names: %s", error_get());

    /* Invalid UTF-8: each bad byte becomes U+FFFD. */
    pretok *p = pretok_new("llama-bpe", &info);
    const char junk[] = "a\xff\xfe b\xc3(\xe2\x82 \xed\xa0\x80z";
    vocab_words w = {0};
    EXPECT(p && pretok_split(p, junk, sizeof junk - 1, &w) == 0, "split of invalid UTF-8 failed");
    size_t fffd = 0;
    for (size_t off = 0; off < w.len;) {
        uint32_t c = utf8_decode(w.buf, w.len, &off);
        int b = gpt2_cpt_to_byte(c);
        EXPECT(b >= 0, "word byte outside the GPT-2 map");
        (void)b;
    }
    /* Raw bytes of the words: U+FFFD is EF BF BD. */
    char *joined = split_joined(p, junk, sizeof junk - 1);
    for (const char *q = joined; q && (q = strstr(q, "\xef\xbf\xbd")); q += 3) fffd++;
    EXPECT(fffd == 5, "expected 5 replacement characters (ff, fe, c3, e2, 82), got %zu", fffd);
    EXPECT(joined && strstr(joined, "\xed\xa0\x80"),
           "a well-formed surrogate is kept as llama.cpp keeps it");
    free(joined);
    vocab_words_free(&w);
    pretok_free(p);
}

HARNESS_MAIN("pretok", HARNESS_TEST(test_names), HARNESS_TEST(test_reference_splits), HARNESS_TEST(test_long_runs),
             HARNESS_TEST(test_errors))
