"""llama_cpp.llama's names (from llama_cpp.llama import Llama)."""
from .._llama import Llama, LlamaState, LogitsProcessorList, StoppingCriteriaList  # noqa: F401
