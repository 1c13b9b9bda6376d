"""Container §8 auxiliary rules in ``ninfer_core.validate`` (and so ``convert validate``): a divisor that is
not one fp32 element, Hadamard signs that are not ±1 or not the input width, ``input_columns`` on a
non-``gguf_*`` matrix or not a permutation (docs/format/container.md §8, §12.6)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from converters.cli import main as cli_main
from ninfer_core import ArtifactWriter, Binding, Component, Use, validate

K = 1024


def write(path, aux: dict[str, tuple], *, weight_format: str = "bf16", weight_layout: str = "contiguous_le_v1"):
    """One [4, K] weight with a use whose auxiliaries are ``role -> (object id, shape, format, values, binding)``."""
    w = ArtifactWriter(path, components={"text": Component({"architectures": ["T"]})})
    w.add_tensor("w", (4, K), weight_format, weight_layout)
    for oid, shape, fmt, _, _ in aux.values():
        w.add_tensor(oid, shape, fmt, "contiguous_le_v1")
    w.add_binding("text/p", Binding.whole("w"))
    w.add_use(Use("text/p", "text/x", "A16Only", {role: b for role, (_, _, _, _, b) in aux.items()}))
    with w:
        from ninfer_core import codecs

        w.write_object("w", codecs.encode(weight_format, weight_layout, np.zeros((4, K), np.float32))
                       if not weight_format.startswith("gguf_") else bytes(codecs.encoded_size(weight_format, weight_layout, (4, K))))
        for oid, shape, fmt, values, _ in aux.values():
            w.write_object(oid, codecs.encode(fmt, "contiguous_le_v1", np.asarray(values).reshape(shape)))
    return path


def rules(path) -> list[str]:
    return [f.rule for f in validate(path) if f.rule.startswith("auxiliary_")]


SIGNS = np.where(np.arange(K) % 3, 1.0, -1.0)
CASES = {
    "scalar divisor": ({"activation_input_divisor": ("d", (), "fp32", 2.0, Binding.whole("d"))}, []),
    "one element of a vector": ({"activation_input_divisor": ("d", (4,), "fp32", [1, 2, 3, 4],
                                                              Binding.of_parts([("d", (2, 3))]))}, []),
    "vector divisor": ({"activation_input_divisor": ("d", (4,), "fp32", [1, 2, 3, 4], Binding.whole("d"))},
                       ["auxiliary_divisor_shape"]),
    "bf16 divisor": ({"activation_input_divisor": ("d", (), "bf16", 2.0, Binding.whole("d"))},
                     ["auxiliary_divisor_shape"]),
    "signs": ({"hadamard_signs": ("s", (K,), "bf16", SIGNS, Binding.whole("s"))}, []),
    "signs not ±1": ({"hadamard_signs": ("s", (K,), "bf16", np.where(np.arange(K) == 7, 0.5, SIGNS),
                                         Binding.whole("s"))}, ["auxiliary_signs_value"]),
    "signs of another width": ({"hadamard_signs": ("s", (2 * K,), "bf16", np.ones(2 * K), Binding.whole("s"))},
                               ["auxiliary_signs_shape"]),
    "columns on bf16": ({"input_columns": ("c", (K,), "int32", np.arange(K)[::-1], Binding.whole("c"))},
                        ["auxiliary_columns_format"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_auxiliary_rules(tmp_path, case):
    aux, expected = CASES[case]
    assert rules(write(tmp_path / "a.ninfer", aux)) == expected


def test_input_columns_on_gguf_matrix(tmp_path):
    ok = write(tmp_path / "a.ninfer", {"input_columns": ("c", (K,), "int32", np.arange(K)[::-1], Binding.whole("c"))},
               weight_format="gguf_q8_0", weight_layout="ggml_blocks_v1")
    assert rules(ok) == []
    repeated = np.arange(K)
    repeated[5] = 4
    bad = write(tmp_path / "b.ninfer", {"input_columns": ("c", (K,), "int32", repeated, Binding.whole("c"))},
                weight_format="gguf_q8_0", weight_layout="ggml_blocks_v1")
    assert rules(bad) == ["auxiliary_columns_value"]


def test_convert_validate_fails_a_vector_divisor(tmp_path, capsys):
    path = write(tmp_path / "a.ninfer", CASES["vector divisor"][0])
    cli_main(["validate", str(path), "--json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    hit = [f for f in findings if f.get("detail", {}).get("rule") == "auxiliary_divisor_shape"]
    assert hit and hit[0]["severity"] == "ERROR"
