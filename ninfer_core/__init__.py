"""ninfer_core: the NInfer v3 format — container reader, writer, splitter, validator, and the codecs.

Knows nothing about GGUF sources or model architectures (see ``converters/`` for those).
"""
