/*
 * pretok_table — the BPE pre-tokenizers llama.cpp knows: for each family the
 * regexes it applies in order (each splits every piece the previous ones
 * left), and which tokenizer.ggml.pre names select it with which flags.
 *
 * The regexes are llama.cpp's (src/llama-vocab.cpp, llm_tokenizer_bpe), in
 * their "adapted" form where llama.cpp rewrote a tokenizer.json regex (e.g.
 * (?i:'s|...) spelled as '[sS]|...). \s and \S are rewritten by pretok.c to
 * the exact Unicode White_Space set before compiling with PCRE2.
 *
 * Included only from pretok.c.
 */
#ifndef TESSERA_VOCAB_PRETOK_TABLE_H
#define TESSERA_VOCAB_PRETOK_TABLE_H

enum { PRETOK_MAX_REGEX = 6 };

#define RX_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_LLAMA3                                                                              \
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                             \
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Ranges are spelled \x{...}: some characters (U+1FD3, U+2126, U+212A, ...)
 * are not stable under Unicode normalisation, which editors may apply. */
#define RX_PORO " ?[^(\\s|.,!?…。，、।۔،)]+"
/* The middle range U+0800-U+4E00 holds whitespace (U+1680, U+2000.., U+3000)
 * that llama.cpp turns into \v before matching: keep it out. */
#define RX_CJK_DEEPSEEK "(?:(?!\\s)[一-龥ࠀ-一가-퟿])+"
#define RX_CJK_KANA "[一-龥぀-ゟ゠-ヿ]+"
#define RX_ASCII_PUNCT_WORD "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
/* llama.cpp matches \p{...} on a "collapsed" text where each ASCII character
 * stays and every other one becomes its category, and spells \p{S} as the
 * ASCII symbols $+<=>^`| plus that category: '~' is left out. These keep its
 * results with PCRE2's real categories. */
#define RX_PS_LLAMA "(?:(?!~)[\\p{P}\\p{S}])"
#define RX_NOT_LPS_LLAMA "(?:~|[^\r\n\\p{L}\\p{P}\\p{S}])"

/* "Uppercase-ish then lowercase-ish letters". tokenizer.json has
 * [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]* / [\p{Ll}\p{Lm}\p{Lo}\p{M}]+; llama.cpp
 * rewrote them as ((?=[\p{L}])([^a-z]))* / ((?=[\p{L}])([^A-Z]))+ (a letter
 * that is not a-z / not A-Z; non-ASCII letters are both), which we keep for
 * its results, spelled as plain classes: the lookahead-and-capture form
 * backtracks itself into PCRE2's match limit on long runs of letters. */
#define RX_UPPER_L "[^\\P{L}a-z]"
#define RX_LOWER_L "[^\\P{L}A-Z]"
#define RX_UPPER_LM "(?:[^\\P{L}a-z]|\\p{M})"
#define RX_LOWER_LM "(?:[^\\P{L}A-Z]|\\p{M})"
#define RX_GPT4O_LIKE(UP, LO)                                                                  \
    "[^\\r\\n\\p{L}\\p{N}]?" UP "*" LO "+" RX_CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?" UP "+" LO \
    "*" RX_CONTRACTIONS "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef enum pretok_family {
    PF_DEFAULT,
    PF_LLAMA3,
    PF_JAIS2,
    PF_DEEPSEEK_LLM,
    PF_DEEPSEEK3,
    PF_SPARK2_5,
    PF_YOUTU,
    PF_DEEPSEEK_CODER,
    PF_FALCON,
    PF_STARCODER,
    PF_GPT2,
    PF_QWEN2,
    PF_QWEN35,
    PF_PORO,
    PF_VIKING,
    PF_TEKKEN,
    PF_CHAMELEON,
    PF_GPT4O,
    PF_GRANITE_EMB_MULTI,
    PF_BAILINGMOE,
    PF_SEED_CODER,
    PF_UFAKZEKA,
    PF_LAGUNA,
    PF_EXAONE_MOE,
    PF_MINICPM5,
    PF_GEMMA4,
    PF_COUNT
} pretok_family;

static const char *const pretok_regexes[PF_COUNT][PRETOK_MAX_REGEX] = {
    [PF_DEFAULT] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"},
    [PF_LLAMA3] = {RX_LLAMA3},
    [PF_JAIS2] = {RX_CONTRACTIONS
                  "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                  "\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|"
                  "\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|"
                  "\\s{1}"},
    [PF_DEEPSEEK_LLM] =
        {"[\r\n]",
         "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
         "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
         "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
         "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
         "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
         "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
         "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}"
         "\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}"
         "\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
         "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
         "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
         "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}"
         "\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
         "\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
         "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
         "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
         "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
         "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
         /* U+3000 (first of "　-。") is whitespace, which llama.cpp turns into
          * \v before matching: the range effectively starts at U+3001. */
         "\\s?[!-/:-~！-／：-～‘-‟、-。]+", "\\s+$", RX_CJK_DEEPSEEK, "\\p{N}+"},
    [PF_DEEPSEEK3] = {"\\p{N}{1,3}", RX_CJK_KANA,
                      RX_ASCII_PUNCT_WORD "|" RX_NOT_LPS_LLAMA "?[\\p{L}\\p{M}]+| ?" RX_PS_LLAMA
                                          "+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
    [PF_SPARK2_5] = {"\\p{N}{1,3}", RX_CJK_KANA,
                     RX_ASCII_PUNCT_WORD "|" RX_NOT_LPS_LLAMA "?[\\p{L}\\p{M}]+| ?" RX_PS_LLAMA
                                         "+|[\r\n]|\\s+(?!\\S)|\\s+",
                     "\\p{N}"},
    [PF_YOUTU] = {"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|" RX_CJK_KANA,
                  /* llama.cpp collapses \\p{Lu} \\p{Ll} \\p{Lt} \\p{Lm} \\p{Lo} to "letter" */
                  "[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]*[\\p{L}\\p{M}]+" RX_CONTRACTIONS
                  "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+[\\p{L}\\p{M}]*" RX_CONTRACTIONS
                  "?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    [PF_DEEPSEEK_CODER] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK_DEEPSEEK, "\\p{N}"},
    [PF_FALCON] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"},
    [PF_STARCODER] = {"\\p{N}", RX_GPT2},
    [PF_GPT2] = {RX_GPT2},
    [PF_QWEN2] = {RX_QWEN2},
    [PF_QWEN35] = {RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
                                   "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
                                   "\\s+"},
    [PF_PORO] = {RX_PORO},
    [PF_VIKING] = {RX_PORO, "\\p{N}"},
    [PF_TEKKEN] = {"[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER_L "*" RX_LOWER_L "+"
                   "|[^\\r\\n\\p{L}\\p{N}]?" RX_UPPER_L "+" RX_LOWER_L "*"
                   "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    [PF_CHAMELEON] = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                      "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2},
    [PF_GPT4O] = {RX_GPT4O_LIKE(RX_UPPER_L, RX_LOWER_L)},
    [PF_GRANITE_EMB_MULTI] = {RX_GPT4O_LIKE(RX_UPPER_LM, RX_LOWER_LM)},
    [PF_BAILINGMOE] = {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
                       "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
    [PF_SEED_CODER] = {RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| "
                                       "?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
    [PF_UFAKZEKA] = {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*["
                     "\\r\\n]+|\\s+(?!\\S)|\\s+"},
    [PF_LAGUNA] = {"[^\\n]+|[\\n]+", RX_QWEN2},
    [PF_EXAONE_MOE] = {RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: "
                                       "\\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/"
                                       "]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
    [PF_GEMMA4] = {"[^\\n]+|[\\n]+"},
    [PF_MINICPM5] = {"\\p{N}{1,3}", RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| "
                                                    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                                                    "\\s+(?!\\S)|\\s+"},
};

/* Flags a name sets on the vocabulary (llama.cpp's llama_vocab::impl::load). */
enum {
    PN_NO_CLEAN = 1 << 0,      /* clean_spaces = false (BPE default: true) */
    PN_IGNORE_MERGES = 1 << 1, /* a word that is a token is not merged */
    PN_ADD_BOS = 1 << 2,       /* add_bos defaults to true */
    PN_NO_BOS = 1 << 3,        /* no default BOS id */
    /* SentencePiece-style BPE (gemma4): spaces escaped to U+2581, raw UTF-8
     * instead of GPT-2 byte characters, <0xXX> byte fallback. */
    PN_SPM_STYLE = 1 << 4,
    PN_FORCE_BOS = 1 << 5,     /* add_bos even when the file says false */
    PN_NEWLINE_WORDS = 1 << 6, /* a word of newlines that is a token is whole */
};

typedef struct pretok_name {
    const char *name;
    pretok_family family;
    unsigned flags;
} pretok_name;

static const pretok_name pretok_names[] = {
    {"default", PF_DEFAULT, 0},
    {"llama3", PF_LLAMA3, PN_IGNORE_MERGES | PN_ADD_BOS},
    {"llama-v3", PF_LLAMA3, PN_IGNORE_MERGES | PN_ADD_BOS},
    {"llama-bpe", PF_LLAMA3, PN_IGNORE_MERGES | PN_ADD_BOS},
    {"falcon3", PF_LLAMA3, PN_IGNORE_MERGES | PN_ADD_BOS},
    {"falcon-h1", PF_LLAMA3, PN_IGNORE_MERGES | PN_ADD_BOS},
    {"pixtral", PF_LLAMA3, PN_IGNORE_MERGES | PN_ADD_BOS},
    {"midm-2.0", PF_LLAMA3, PN_IGNORE_MERGES | PN_ADD_BOS},
    {"lfm2", PF_LLAMA3, PN_IGNORE_MERGES | PN_ADD_BOS},
    {"jina-v5-nano", PF_LLAMA3, PN_IGNORE_MERGES | PN_ADD_BOS},
    {"deepseek-llm", PF_DEEPSEEK_LLM, PN_NO_CLEAN},
    {"deepseek-coder", PF_DEEPSEEK_CODER, PN_NO_CLEAN},
    {"deepseek-v3", PF_DEEPSEEK3, PN_NO_CLEAN},
    {"spark2_5", PF_SPARK2_5, PN_NO_CLEAN},
    {"youtu", PF_YOUTU, PN_NO_CLEAN | PN_IGNORE_MERGES},
    {"falcon", PF_FALCON, 0},
    {"mpt", PF_GPT2, 0},
    {"starcoder", PF_STARCODER, 0},
    {"gpt-2", PF_GPT2, 0},
    {"phi-2", PF_GPT2, 0},
    {"jina-es", PF_GPT2, 0},
    {"jina-de", PF_GPT2, 0},
    {"gigachat", PF_GPT2, 0},
    {"jina-v2-es", PF_GPT2, 0},
    {"jina-v2-de", PF_GPT2, 0},
    {"a.x-4.0", PF_GPT2, 0},
    {"mellum", PF_GPT2, 0},
    {"modern-bert", PF_GPT2, 0},
    {"jais-2", PF_JAIS2, 0},
    {"jina-v1-en", PF_GPT2, 0},
    {"jina-v2-code", PF_GPT2, 0},
    {"roberta-bpe", PF_GPT2, 0},
    {"refact", PF_STARCODER, 0},
    {"command-r", PF_STARCODER, PN_NO_CLEAN},
    {"qwen2", PF_QWEN2, PN_NO_CLEAN},
    {"deepseek-r1-qwen", PF_QWEN2, PN_NO_CLEAN},
    {"kormo", PF_QWEN2, PN_NO_CLEAN},
    {"f2llmv2", PF_QWEN2, PN_NO_CLEAN},
    {"qwen35", PF_QWEN35, PN_NO_CLEAN},
    {"stablelm2", PF_QWEN2, 0},
    {"olmo", PF_GPT2, 0},
    {"dbrx", PF_LLAMA3, 0},
    {"smaug-bpe", PF_LLAMA3, 0},
    {"poro-chat", PF_PORO, PN_NO_CLEAN},
    {"glm4", PF_LLAMA3, PN_NO_BOS},
    {"chatglm-bpe", PF_LLAMA3, PN_NO_BOS},
    {"viking", PF_VIKING, PN_NO_CLEAN},
    {"jais", PF_GPT2, 0},
    {"tekken", PF_TEKKEN, PN_NO_CLEAN | PN_IGNORE_MERGES | PN_ADD_BOS},
    {"smollm", PF_STARCODER, PN_NO_CLEAN},
    {"codeshell", PF_STARCODER, 0},
    {"bloom", PF_PORO, 0},
    {"gpt3-finnish", PF_PORO, 0},
    {"exaone", PF_STARCODER, 0},
    {"exaone4", PF_GPT2, 0},
    {"exaone-moe", PF_EXAONE_MOE, 0},
    {"chameleon", PF_CHAMELEON, PN_NO_CLEAN | PN_ADD_BOS},
    {"minerva-7b", PF_STARCODER, 0},
    {"megrez", PF_QWEN2, 0},
    {"gpt-4o", PF_GPT4O, PN_NO_CLEAN},
    {"llama4", PF_GPT4O, PN_NO_CLEAN},
    {"kanana2", PF_GPT4O, PN_NO_CLEAN},
    {"talkie", PF_GPT4O, PN_NO_CLEAN},
    {"minimax-m2", PF_GPT4O, PN_NO_CLEAN},
    {"granite-embed-multi-97m", PF_GRANITE_EMB_MULTI, PN_NO_CLEAN | PN_IGNORE_MERGES},
    {"trillion", PF_GPT2, PN_NO_CLEAN},
    {"granite-docling", PF_GPT2, PN_NO_CLEAN},
    {"bailingmoe", PF_BAILINGMOE, PN_NO_CLEAN},
    {"bailingmoe2", PF_BAILINGMOE, PN_NO_CLEAN},
    {"llada-moe", PF_BAILINGMOE, PN_NO_CLEAN},
    {"seed-coder", PF_SEED_CODER, PN_NO_CLEAN},
    {"hunyuan", PF_QWEN2, PN_NO_CLEAN},
    {"hunyuan-dense", PF_DEEPSEEK3, PN_NO_CLEAN},
    {"hy_v4", PF_DEEPSEEK3, PN_NO_CLEAN},
    {"joyai-llm", PF_DEEPSEEK3, PN_NO_CLEAN},
    {"ufakzeka", PF_UFAKZEKA, PN_NO_CLEAN},
    {"grok-2", PF_QWEN2, PN_NO_CLEAN},
    {"laguna", PF_LAGUNA, PN_NO_CLEAN},
    {"solar-open", PF_QWEN2, PN_NO_CLEAN},
    {"mellum2", PF_STARCODER, 0},
    {"minicpm5", PF_MINICPM5, PN_IGNORE_MERGES},
    {"gemma4", PF_GEMMA4, PN_SPM_STYLE | PN_FORCE_BOS | PN_NEWLINE_WORDS},
    {"granite-embed-multi-311m", PF_GEMMA4, PN_SPM_STYLE | PN_FORCE_BOS | PN_NEWLINE_WORDS},
    {"sarvam-moe", PF_GEMMA4, PN_SPM_STYLE | PN_NO_CLEAN},
};

#endif
