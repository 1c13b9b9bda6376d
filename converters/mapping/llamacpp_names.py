"""llama.cpp's words for formats and recipes, and the nearest NInfer v3 answer (docs/recipes.md §llama.cpp
names).

A llama.cpp user types the GGML tensor type names of ``llama-quantize --output-tensor-type q8_0`` and the file
type names of ``llama-quantize model.gguf Q4_K_M``. Neither is a v3 format or a recipe name, so they are
refused; the refusal names the nearest v3 format (:data:`TENSOR_TYPES`) or recipe (:data:`FILE_TYPES`).
Nearest means: the same bits per weight where a v3 format has them, else the next wider one; the GGML
format itself, kept block for block, is ``gguf_<type>`` (``exact`` keeps a source's blocks as they are).
The page's table is checked against these two dictionaries (tests/mapping/test_llamacpp_names.py).
"""

from __future__ import annotations

#: GGML tensor type (lower case, as llama-quantize takes it) → the nearest v3 format.
TENSOR_TYPES: dict[str, str] = {
    "f32": "fp32",
    "f16": "bf16",
    "bf16": "bf16",
    "q8_0": "q8_g32_fp16",
    "q8_1": "q8_g32_fp16",
    "q8_k": "q8_g32_fp16",
    "q6_k": "q6_g64_fp16",
    "q5_0": "q5_g64_fp16",
    "q5_1": "q5_g64_fp16",
    "q5_k": "q5_g64_fp16",
    "q4_0": "q4_g64_fp16",
    "q4_1": "q4_g64_fp16",
    "q4_k": "q4_g64_fp16",
    "iq4_nl": "q4_g64_fp16",
    "iq4_xs": "q4_g64_fp16",
    "q3_k": "q4_g64_fp16",
    "iq3_s": "q4_g64_fp16",
    "iq3_xxs": "q4_g64_fp16",
    "q2_k": "q2_g64_fp16",
    "iq2_s": "q2_g64_fp16",
    "iq2_xs": "q2_g64_fp16",
    "iq2_xxs": "q2_g64_fp16",
    "iq1_s": "t2_g128_fp16",
    "iq1_m": "t2_g128_fp16",
    "tq1_0": "t2_g128_fp16",
    "tq2_0": "t2_g128_fp16",
    "q1_0": "t2_g128_fp16",
    "mxfp4": "nvfp4",
    "nvfp4": "nvfp4",
}

#: llama-quantize file type (upper case, as its usage lists them) → the nearest shipped recipe.
FILE_TYPES: dict[str, str] = {
    "F32": "bf16",
    "F16": "bf16",
    "BF16": "bf16",
    "COPY": "exact",
    "Q8_0": "groupwise-int",
    "Q6_K": "groupwise-int",
    "Q5_0": "groupwise-int",
    "Q5_1": "groupwise-int",
    "Q5_K_S": "groupwise-int",
    "Q5_K_M": "groupwise-int",
    "Q4_0": "groupwise-int",
    "Q4_1": "groupwise-int",
    "Q4_K_S": "groupwise-int",
    "Q4_K_M": "groupwise-int",
    "IQ4_NL": "groupwise-int",
    "IQ4_XS": "groupwise-int",
    "Q3_K_S": "groupwise-int",
    "Q3_K_M": "groupwise-int",
    "Q3_K_L": "groupwise-int",
    "IQ3_XXS": "groupwise-int",
    "IQ3_XS": "groupwise-int",
    "IQ3_S": "groupwise-int",
    "IQ3_M": "groupwise-int",
    "Q2_K": "groupwise-int",
    "Q2_K_S": "groupwise-int",
    "IQ2_XXS": "groupwise-int",
    "IQ2_XS": "groupwise-int",
    "IQ2_S": "groupwise-int",
    "IQ2_M": "groupwise-int",
    "IQ1_S": "ternary",
    "IQ1_M": "ternary",
    "TQ1_0": "ternary",
    "TQ2_0": "ternary",
    "MXFP4_MOE": "nvfp4",
    "NVFP4": "nvfp4",
}


def nearest_format(name: str) -> str | None:
    """The v3 format nearest to GGML type ``name`` (any case), if it is one."""
    return TENSOR_TYPES.get(name.strip().lower())


def nearest_recipe(name: str) -> str | None:
    """The shipped recipe nearest to llama-quantize file type ``name`` (any case, ``MOSTLY_`` optional)."""
    key = name.strip().upper().removeprefix("MOSTLY_")
    return FILE_TYPES.get(key)


def format_hint(name: str) -> str:
    """The clause an unknown-format error adds for a llama.cpp type name ('' for other names)."""
    fmt = nearest_format(name)
    if fmt is None:
        return ""
    keep = f"gguf_{name.strip().lower()}"
    return (f"; {name.strip()!r} is llama.cpp's name: the nearest v3 format is {fmt} ({keep} keeps GGML's blocks "
            "as they are; docs/recipes.md §llama.cpp names)")


def recipe_hint(name: str) -> str:
    """The clause an unknown-recipe error adds for a llama-quantize file type ('' for other names)."""
    recipe = nearest_recipe(name)
    if recipe is None:
        return ""
    return (f"; {name.strip()!r} is a llama-quantize type: the nearest recipe is {recipe} "
            "(docs/recipes.md §llama.cpp names)")
