"""llama_cpp.llama_chat_format's multimodal chat handlers, over Tessera:

    from tessera.llama_cpp import Llama
    from tessera.llama_cpp.llama_chat_format import Llava15ChatHandler
    llm = Llama("model.gguf", chat_handler=Llava15ChatHandler(clip_model_path="mmproj-model.gguf"))
    llm.create_chat_completion(messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}},
        {"type": "text", "text": "What is in the picture?"}]}])

A handler here only names the projector (an mmproj GGUF, as llama.cpp's
--mmproj takes it): Llama loads it beside the model, and image parts (a
data: URI, a file path or file:// URL; remote http(s) URLs are refused,
never fetched) go where the model's own chat template puts them, as
llama-server does; unlike llama-cpp-python, whose LLaVA handler writes its
own Vicuna-style prompt. The projector types are the engine's (docs/multimodal.md:
LLaVA-1.5 style "mlp" for now); another is refused when Llama loads it.
"""
import os


class Llava15ChatHandler:
    """A multimodal projector for Llama(chat_handler=...): clip_model_path is
    the mmproj GGUF file."""

    def __init__(self, clip_model_path, verbose=True):
        self.clip_model_path = os.fspath(clip_model_path)
        self.verbose = bool(verbose)
