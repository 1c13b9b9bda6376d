"""One GGML type table: the GGUF reader's id table, the ternary table, check's multiplier probe and the
source decoder all take their block facts from ``ninfer_core.codecs.ggml_types``."""

from __future__ import annotations

from converters.acceptance.check import MULTIPLIERS
from converters.sources import gguf_types, ternary
from converters.sources.decode import GGUF_PLAIN
from ninfer_core.codecs.ggml_types import BY_ID, BY_NAME


def test_every_known_id_of_the_reader_has_the_core_tables_block():
    for type_id in range(0, 200):
        t = gguf_types.ggml_type(type_id)
        if t.status != "known":
            continue
        (core,) = [c for c in BY_ID[type_id] if c.name == t.name]
        assert t.block == (core.block_size, core.type_size), t.name


def test_reader_specific_facts_name_the_core_types():
    assert gguf_types.FORK_TYPES == {142: ("PQ2_0", (128, 34)), 143: ("PTQ1_0", (128, 28))}
    legacy, official = BY_NAME["Q2_0_G128"], BY_NAME["Q2_0_G64"]
    assert gguf_types.Q2_0_LAYOUTS == {"prismml-legacy": (legacy.block_size, legacy.type_size),
                                       "ggml-official": (official.block_size, official.type_size)}
    assert gguf_types.ggml_type(9).modern == ("Q8_1", (32, 36))  # modern ggml, not gguf-py's 40-byte row


def test_ternary_types_and_the_probe_read_d_where_the_table_says():
    for name, t in ternary.TYPES.items():
        core = BY_NAME[name]
        assert (t.block, t.block_bytes, t.scale_offset) == (core.block_size, core.type_size, core.multipliers[0])
    assert ternary.scale_columns("PTQ1_0") == slice(26, 28)
    assert MULTIPLIERS["Q6_K"].offset == 208 and MULTIPLIERS["Q6_K"].non_negative is False
    assert set(MULTIPLIERS) == {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}


def test_plain_types_decode_with_the_tables_word():
    assert GGUF_PLAIN == {"F32": "f4", "F16": "f2", "F64": "f8", "I8": "i1", "I16": "i2", "I32": "i4", "I64": "i8"}
