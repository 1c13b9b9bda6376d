"""Fused 3-D NVFP4 expert tensors of a ModelOpt checkpoint, read as the per-expert modules they hold
(docs/prequantized.md §Fused expert tensors).

ModelOpt's fused-expert export (models whose transformers implementation holds the experts as 3-D parameters)
writes, per MoE block ``P.experts`` and projection ``gate_up_proj`` / ``down_proj``:

- ``P.experts.<proj>`` U8 ``[E, N, K/2]`` (expert ``e``'s packed E2M1 rows, as ``weight`` of a module);
- ``P.experts.<proj>_weight_scale`` F8_E4M3 ``[E, N, K/16]``;
- ``P.experts.<proj>_weight_scale_2`` F32 ``[E]`` (one per expert), ``[E, 2]`` / ``[E, 2, 1]`` (gate_up: one per
  half) or ``[]`` / ``[1]`` (shared);
- ``P.experts.<proj>_input_scale`` F32, the same shapes (optional).

Expert ``e``'s rows are one contiguous byte range of each 3-D tensor, so :func:`split` replaces the fused tensors
by per-expert component views — ``P.experts.{e}.gate_proj.*`` (rows ``[0, I)`` of ``gate_up_proj[e]``, transformers'
``chunk(2)`` order), ``P.experts.{e}.up_proj.*`` (rows ``[I, 2I)``) and ``P.experts.{e}.down_proj.*`` — byte offsets
into the same files, nothing copied. Each then reads exactly like ModelOpt's per-expert export and feeds the expert
bank the mapping already binds from per-expert names. Anything else rank-3 beside a block scale (a transposed
``[E, K, N]`` layout, another convention) is refused (rule ``prequantized_fused_experts``).
"""

from __future__ import annotations

import dataclasses

from converters.errors import SourceFormatError

SECTION = "docs/prequantized.md §Fused expert tensors"
PROJECTIONS = {"gate_up_proj": ("gate_proj", "up_proj"), "down_proj": ("down_proj",)}
SCALARS = ("weight_scale_2", "input_scale")
ITEMSIZE = {"U8": 1, "F8_E4M3": 1, "F32": 4, "BF16": 2, "F16": 2}


def fused_names(tensors: dict) -> list[str]:
    """Names of rank-3 ``<...>.experts.<proj>`` tensors that carry a ``_weight_scale`` beside them."""
    return [name for name, t in tensors.items()
            if name.rpartition(".")[2] in PROJECTIONS and name.rpartition(".")[0].endswith(".experts")
            and len(t.shape) == 3 and f"{name}_weight_scale" in tensors]


def split(tensors: dict, convention: str) -> dict:
    """``tensors`` with every fused NVFP4 expert tensor (and its scales) replaced by per-expert views."""
    names = fused_names(tensors)
    if not names:
        return tensors
    replaced: dict[str, list] = {}
    for name in names:
        codes = tensors[name]
        if convention != "modelopt" or codes.dtype != "U8":
            raise _refuse(codes, f"{name}: fused {codes.dtype} experts of a {convention} checkpoint are not read; "
                                 "only ModelOpt's NVFP4 layout (U8 codes [E, N, K/2]) is")
        replaced.update(_views(tensors, name))
    out = {}
    for name, t in tensors.items():
        if name in replaced:
            out.update({v.name: v for v in replaced[name]})
        else:
            out[name] = t
    return out


def _views(tensors: dict, name: str) -> dict[str, list]:
    """``{fused tensor name: [its per-expert views]}`` for the codes, block scales and scalars of ``name``."""
    codes, scales = tensors[name], tensors[f"{name}_weight_scale"]
    e, n, half = (int(d) for d in codes.shape)
    block, proj = name.rpartition(".")[0], name.rpartition(".")[2]
    if scales.dtype != "F8_E4M3" or tuple(scales.shape) != (e, n, half // 8):
        raise _refuse(scales, f"{name}_weight_scale has {scales.dtype} {list(scales.shape)}, expected F8_E4M3 "
                              f"{[e, n, half // 8]} (a transposed [E, K, N] layout is not read)")
    parts = PROJECTIONS[proj]
    if n % len(parts):
        raise _refuse(codes, f"{name}: {n} rows do not split into {len(parts)} equal halves (gate | up)")
    rows = n // len(parts)
    out: dict[str, list] = {name: [], f"{name}_weight_scale": []}
    for x in range(e):
        for h, part in enumerate(parts):
            module = f"{block}.{x}.{part}"
            r0 = x * n + h * rows
            out[name].append(_rows(codes, f"{module}.weight", r0, rows))
            out[f"{name}_weight_scale"].append(_rows(scales, f"{module}.weight_scale", r0, rows))
    for role in SCALARS:
        t = tensors.get(f"{name}_{role}")
        if t is not None:
            out[t.name] = [_scalar(t, f"{block}.{x}.{part}.{role}", x, h, e, len(parts))
                           for x in range(e) for h, part in enumerate(parts)]
    return out


def _rows(t, name: str, r0: int, rows: int):
    """Rows ``[r0, r0 + rows)`` of ``t`` flattened to ``[E·N, C]``, as a 2-D tensor ``name``."""
    cols = int(t.shape[2])
    size = ITEMSIZE[t.dtype]
    length = rows * cols * size
    return dataclasses.replace(t, name=name, shape=(rows, cols), dims=None, file_offset=t.file_offset + r0 * cols * size,
                               byte_length=length, read_length=length if t.read_length is not None else None)


def _scalar(t, name: str, expert: int, half: int, experts: int, halves: int):
    """Expert ``expert``'s (half ``half``'s) element of a per-expert scalar tensor, as a ``[]`` tensor ``name``."""
    shape = tuple(int(d) for d in t.shape)
    if t.dtype not in ITEMSIZE or t.dtype in ("U8", "F8_E4M3"):
        raise _refuse(t, f"{t.name} has dtype {t.dtype}, expected a float scale")
    if shape in ((), (1,)):
        index = 0
    elif shape == (experts,):
        index = expert
    elif shape in ((experts, 2), (experts, 2, 1)) and halves == 2:
        index = expert * 2 + half
    else:
        raise _refuse(t, f"{t.name} has shape {list(shape)}, expected [], [1], [{experts}]"
                         + (f" or [{experts}, 2]" if halves == 2 else ""))
    size = ITEMSIZE[t.dtype]
    return dataclasses.replace(t, name=name, shape=(), dims=None, file_offset=t.file_offset + index * size,
                               byte_length=size, read_length=size if t.read_length is not None else None)


def _refuse(t, message: str) -> SourceFormatError:
    return SourceFormatError(message, file=str(t.file), json_path=t.name, rule="prequantized_fused_experts",
                             section=SECTION)
