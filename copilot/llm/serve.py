"""`python -m copilot.llm.serve --model M.gguf [llama_cpp.server's options]`: llama-cpp-python's OpenAI-compatible
server with this machine's CPU kernels loaded first (copilot.llm.cpu_backend). With requirements.txt's build,
whose CPU code is loadable variants, plain `python -m llama_cpp.server` loads no CPU backend and serves no model."""

from __future__ import annotations

import logging

from copilot.llm.local import _llama_cpp


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    _llama_cpp()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
