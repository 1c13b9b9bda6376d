"""Mapping engine: rules as data (``mappings/*.yaml``), a strict loader, transform chains, the binder.

- :mod:`.located` — YAML with line numbers (errors say ``file:line``), duplicate keys refused;
- :mod:`.expr` — the safe integer evaluator for shapes and transform arguments;
- :mod:`.schema` — the mapping file schema (immutable records);
- :mod:`.loader` — :func:`load_mapping` / :func:`load_mapping_for`: strict validation, ``file:line`` errors;
- :mod:`.chain` — a transform chain resolved into row/column maps and value steps;
- :mod:`.binder` — :func:`bind`: rules × config × source tensors → :class:`BoundModel`, with coverage;
- :mod:`.doc` — the generated tables in ``docs/mappings/``.
"""

from converters.mapping.binder import BoundModel, BoundParameter, BoundSource, bind, source_kind_of
from converters.mapping.chain import Chain, resolve_chain
from converters.mapping.loader import load_mapping, load_mapping_for, mapping_path
from converters.mapping.schema import MAPPINGS_DIR, Mapping, ParameterRule

__all__ = [
    "MAPPINGS_DIR", "BoundModel", "BoundParameter", "BoundSource", "Chain", "Mapping", "ParameterRule", "bind",
    "load_mapping", "load_mapping_for", "mapping_path", "resolve_chain", "source_kind_of",
]
