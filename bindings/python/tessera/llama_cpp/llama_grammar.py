"""llama_cpp.llama_grammar's names (from llama_cpp.llama_grammar import LlamaGrammar)."""
from .._llama import LlamaGrammar  # noqa: F401
