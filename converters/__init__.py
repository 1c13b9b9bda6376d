"""ninfer-convert converters: everything that knows sources and models.

- ``sources/`` — strict GGUF / safetensors / HF readers, row blocks, the tokenizer/frontend rebuild,
  Hadamard and ternary source facts;
- ``model/`` — config normalisation, architectures (one module each), components;
- ``mapping/`` — the mapping YAML loader, binder, transforms and recipes;
- ``pipeline/`` — plan, expert banks, template, proposal, produce, convert;
- ``acceptance/`` — check, verify and validate gates, golden forward, calbin, the report model;
- ``inspect/``, ``regress/``, ``scaleout/``, ``cli/``.
"""

from pathlib import Path

__version__ = "0.1.0"

#: the repository root: ``mappings/``, ``recipes/`` and ``docs/`` live beside the packages
ROOT = Path(__file__).resolve().parent.parent
