"""Ternary/binary block packers against hand-computed blocks and gguf-py; Bonsai GGUFs read back with a
reader and decoders written here from the layout table of ``docs/gguf-conventions.md``
(independent of :mod:`tinymodels.ternary_blocks`), llama.cpp's transforms and Prism's rotation undone."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType
from gguf.quants import dequantize, quantize

from tinymodels import bonsai, qwen35
from tinymodels.ternary_blocks import FORMATS, block_format

Q = GGMLQuantizationType
# (type id, elements, bytes) from the spec's table; id 42 has two geometries
GEOMETRY = {"TQ1_0": (34, 256, 54), "TQ2_0": (35, 256, 66), "Q1_0": (41, 128, 18), "Q2_0": (42, 64, 18),
            "Q2_0_LEGACY": (42, 128, 34), "PQ2_0": (142, 128, 34), "PTQ1_0": (143, 128, 28)}


# ---- scalar references written from the spec text -------------------------------------------------

def ref_trit_byte(digits):
    q = 0
    for t in digits:  # first digit most significant
        q = q * 3 + t
    q *= 3 ** (5 - len(digits))  # a qh byte: four digits and a trailing 0
    return -(-q * 256 // 243)


def ref_pack(name, codes, d):
    """One block, element by element, as the spec's table describes it."""
    q = [c + 1 for c in codes]
    scale = list(np.float16(d).tobytes())
    if name in ("Q2_0", "Q2_0_LEGACY", "PQ2_0"):
        body = [0] * (len(q) // 4)
        for j, v in enumerate(q):
            body[j // 4] |= v << (2 * (j % 4))
        return bytes(scale + body)
    if name == "Q1_0":
        body = [0] * (len(q) // 8)
        for j, c in enumerate(codes):
            body[j // 8] |= (1 if c > 0 else 0) << (j % 8)
        return bytes(scale + body)
    if name == "TQ2_0":
        body = [0] * 64
        for j in (0, 32):
            for m in range(32):
                for lane in range(4):
                    body[j + m] |= q[4 * j + 32 * lane + m] << (2 * lane)
        return bytes(body + scale)
    if name == "TQ1_0":
        body = [ref_trit_byte([q[32 * n + m] for n in range(5)]) for m in range(32)]
        body += [ref_trit_byte([q[160 + 16 * n + m] for n in range(5)]) for m in range(16)]
        body += [ref_trit_byte([q[240 + 4 * n + h] for n in range(4)]) for h in range(4)]
        return bytes(body + scale)
    assert name == "PTQ1_0"
    body = [ref_trit_byte([q[16 * n + m] for n in range(5)]) for m in range(16)]
    body += [ref_trit_byte([q[80 + 8 * n + m] for n in range(5)]) for m in range(8)]
    body += [ref_trit_byte([q[120 + 2 * n + h] for n in range(4)]) for h in range(2)]
    return bytes(body + scale)


def ref_decode(name, raw: np.ndarray, k: int) -> np.ndarray:
    """Vectorized decoder (rows of ``k`` elements) from the same table, used to read the Bonsai files."""
    _, be, bb = GEOMETRY[name]
    blocks = raw.reshape(-1, bb)
    if name in ("TQ1_0", "TQ2_0", "PTQ1_0"):
        d, body = blocks[:, -2:].copy().view(np.float16)[:, 0], blocks[:, :-2]
    else:
        d, body = blocks[:, :2].copy().view(np.float16)[:, 0], blocks[:, 2:]
    out = np.zeros((blocks.shape[0], be), np.float32)

    def digit(b, n):
        return (((b.astype(np.uint32) * 3**n) & 0xFF) * 3) >> 8

    if name in ("Q2_0", "Q2_0_LEGACY", "PQ2_0"):
        for j in range(be):
            out[:, j] = ((body[:, j // 4] >> (2 * (j % 4))) & 3).astype(np.float32) - 1
    elif name == "Q1_0":
        for j in range(be):
            out[:, j] = np.where((body[:, j // 8] >> (j % 8)) & 1, 1.0, -1.0)
    elif name == "TQ2_0":
        for j in (0, 32):
            for m in range(32):
                for lane in range(4):
                    out[:, 4 * j + 32 * lane + m] = ((body[:, j + m] >> (2 * lane)) & 3).astype(np.float32) - 1
    else:
        stages = ((32, 0, 0), (16, 32, 160)) if name == "TQ1_0" else ((16, 0, 0), (8, 16, 80))
        qh_bytes, qh_start = (4, 240) if name == "TQ1_0" else (2, 120)
        for count, offset, first in stages:
            for n in range(5):
                for m in range(count):
                    out[:, first + count * n + m] = digit(body[:, offset + m], n).astype(np.float32) - 1
        qh = body[:, -qh_bytes:]
        for n in range(4):
            for h in range(qh_bytes):
                out[:, qh_start + qh_bytes * n + h] = digit(qh[:, h], n).astype(np.float32) - 1
    return (out * d.astype(np.float32)[:, None]).reshape(-1, k)


# ---- packers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FORMATS))
def test_pack_matches_the_scalar_reference_and_round_trips(name):
    fmt = FORMATS[name]
    assert (fmt.type_id, fmt.block_elements, fmt.block_bytes) == GEOMETRY[name]
    rng = np.random.default_rng(7)
    codes = rng.choice(fmt.codes, size=(5, fmt.block_elements)).astype(np.int8)
    d = np.array([0.5, 0.0117, 1.75, 3e-3, 0.0], np.float16)
    packed = fmt.pack(codes, d)
    assert packed.shape == (5, fmt.block_bytes)
    for b in range(5):
        assert packed[b].tobytes() == ref_pack(name, codes[b].tolist(), d[b]), b
    back_codes, back_d = fmt.unpack(packed)
    np.testing.assert_array_equal(back_codes, codes)
    np.testing.assert_array_equal(back_d.view(np.uint16), d.view(np.uint16))
    expected = codes.astype(np.float32) * d.astype(np.float32)[:, None]
    np.testing.assert_array_equal(ref_decode(name, packed, fmt.block_elements), expected)
    np.testing.assert_array_equal(fmt.decode(packed.reshape(-1), 5 * fmt.block_elements), expected.reshape(-1))


def test_worked_trit_bytes():
    """All-zero codes (digit 1): Q = 121 → ceil(121·256/243) = 128; a qh byte Q = 40·3 = 120 → 127.
    All +1 (digit 2): 242 → 255, qh 240 → 253; digit n of byte b is ((b·3^n mod 256)·3) >> 8."""
    ptq = FORMATS["PTQ1_0"]
    zero = ptq.pack(np.zeros((1, 128), np.int8), [1.0])[0]
    assert zero[:24].tolist() == [128] * 24 and zero[24:26].tolist() == [127, 127]
    assert zero[26:].tobytes() == np.float16(1.0).tobytes()
    ones = ptq.pack(np.ones((1, 128), np.int8), [1.0])[0]
    assert ones[:24].tolist() == [255] * 24 and ones[24:26].tolist() == [253, 253]
    b = ref_trit_byte([2, 0, 1, 2, 0])  # Q = 2·81 + 0 + 9 + 2·3 + 0 = 177 → ceil(177·256/243) = 187
    assert b == 187 and [(((b * 3**n) & 0xFF) * 3) >> 8 for n in range(5)] == [2, 0, 1, 2, 0]
    pq = FORMATS["PQ2_0"].pack(np.array([[-1, 0, 1, 2] * 32], np.int8), [0.25])[0]
    assert pq[:2].tobytes() == np.float16(0.25).tobytes() and pq[2:].tolist() == [0b11100100] * 32
    np.testing.assert_array_equal(FORMATS["PQ2_0"].decode(pq, 128)[:4], [-0.25, 0, 0.25, 0.5])  # code 3 is +2·d
    q1 = FORMATS["Q1_0"].pack(np.array([[1, -1, -1, -1, -1, -1, -1, 1] * 16], np.int8), [2.0])[0]
    assert q1[2:].tolist() == [0b10000001] * 16


@pytest.mark.parametrize("name", ["TQ1_0", "TQ2_0"])
def test_tq_types_agree_with_gguf_py(name):
    fmt, qtype = FORMATS[name], Q[name]
    rng = np.random.default_rng(11)
    codes = rng.integers(-1, 2, size=(8, 4, 256)).astype(np.float32)
    codes[:, :, 0] = 1  # every block reaches |code| = 1: d is its largest |value|
    codes[3, 2] = 0  # and one all-zero block
    d = rng.uniform(0.01, 2.0, size=(8, 4, 1)).astype(np.float16).astype(np.float32)
    values = (codes * d).reshape(8, 1024)
    mine = fmt.encode(values)
    np.testing.assert_array_equal(mine, quantize(values, qtype))
    np.testing.assert_array_equal(dequantize(mine, qtype), values)
    np.testing.assert_array_equal(fmt.decode(quantize(values, qtype), 1024), values)


def test_encode_is_exact_or_refuses():
    fmt = block_format("ptq1_0")
    with pytest.raises(ValueError, match="not exactly"):
        fmt.encode(np.full((1, 128), 0.3, np.float32) * np.r_[1.0, np.full(127, 0.5)])
    with pytest.raises(ValueError, match="multiple"):
        fmt.encode(np.zeros((1, 100), np.float32))
    with pytest.raises(ValueError, match="codes outside"):
        FORMATS["TQ1_0"].pack(np.full((1, 256), 2, np.int8), [1.0])
    with pytest.raises(ValueError, match="not supported"):
        block_format("IQ2_XS")
    # type id 42 is resolved by byte length: 128 elements are 34 bytes (legacy) or 2 × 18 (official)
    row = np.ones((1, 128), np.float32)
    assert FORMATS["Q2_0_LEGACY"].encode(row).nbytes == 34 and FORMATS["Q2_0"].encode(row).nbytes == 36


# ---- Bonsai GGUFs -----------------------------------------------------------------------------------

class RawReader(GGUFReader):
    """GGUFReader's header parser; tensor infos kept raw, so fork type ids (42, 142, 143) can be read."""

    def _build_tensors(self, start_offs, fields):
        self.raw = {}
        for field in fields:
            _, name, _, dims, dtype, offset = field.parts
            self.raw[bytes(name).decode()] = (tuple(int(x) for x in dims), int(dtype[0]), int(start_offs + offset[0]))
        self.tensors = []


def read_bonsai(path, name):
    reader = RawReader(path)
    size = path.stat().st_size
    ends = sorted(o for _, _, o in reader.raw.values()) + [size]
    out, types = {}, {}
    for tname, (dims, type_id, offset) in reader.raw.items():
        shape = tuple(reversed(dims))
        count = math.prod(shape)
        if type_id in (0, 30):
            data = reader.data[offset : offset + count * (4 if type_id == 0 else 2)]
            values = data.view(np.float32) if type_id == 0 else (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            out[tname] = np.array(values).reshape(shape)
        else:
            available = next(e for e in ends if e > offset) - offset
            _, be, bb = GEOMETRY[name]
            assert GEOMETRY[name][0] == type_id
            assert count // be * bb <= available < count // be * bb + 32  # its length fixes id 42's geometry
            out[tname] = ref_decode(name, np.array(reader.data[offset : offset + count // be * bb]), shape[-1]).reshape(shape)
        types[tname] = type_id
    return reader, out, types


def tiled_to_grouped(x, hk, r, hd, axis=0):
    moved = np.moveaxis(x, axis, 0)
    grouped = moved.reshape(r, hk, hd, *moved.shape[1:]).swapaxes(0, 1).reshape(moved.shape)
    return np.moveaxis(grouped, 0, axis)


def undo(g, cfg, grouped_out=False):
    """llama.cpp's Qwen3.5 transforms undone; ``grouped_out``: ``ssm_out`` columns already grouped."""
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv, r, nh, hd = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], hv // hk, cfg["num_attention_heads"], cfg["head_dim"]
    kd = hk * dk
    out = {"text/token_embedding": g["token_embd.weight"], "text/output_head": g["output.weight"],
           "text/final_norm": g["output_norm.weight"] - 1}
    for layer, kind in enumerate(cfg["layer_types"]):
        b, q = f"blk.{layer}.", f"text/layers/{layer}/"
        out[q + "input_norm"], out[q + "post_attention_norm"] = g[b + "attn_norm.weight"] - 1, g[b + "post_attention_norm.weight"] - 1
        out.update({q + f"mlp/{p}": g[b + f"ffn_{p}.weight"] for p in ("gate", "up", "down")})
        if kind == "full_attention":
            heads = g[b + "attn_q.weight"].reshape(nh, 2, hd, -1)
            out[q + "attention/query"], out[q + "attention/gate"] = heads[:, 0].reshape(nh * hd, -1), heads[:, 1].reshape(nh * hd, -1)
            for key, name in (("key", "attn_k"), ("value", "attn_v"), ("output", "attn_output")):
                out[q + f"attention/{key}"] = g[b + f"{name}.weight"]
            out[q + "attention/query_norm"] = g[b + "attn_q_norm.weight"] - 1
            out[q + "attention/key_norm"] = g[b + "attn_k_norm.weight"] - 1
            continue
        qkv, conv = g[b + "attn_qkv.weight"], g[b + "ssm_conv1d.weight"]
        out[q + "gdn/query"], out[q + "gdn/key"] = qkv[:kd], qkv[kd : 2 * kd]
        out[q + "gdn/value"] = tiled_to_grouped(qkv[2 * kd :], hk, r, dv)
        out[q + "gdn/z"] = tiled_to_grouped(g[b + "attn_gate.weight"], hk, r, dv)
        out[q + "gdn/b"] = tiled_to_grouped(g[b + "ssm_beta.weight"], hk, r, 1)
        out[q + "gdn/a"] = tiled_to_grouped(g[b + "ssm_alpha.weight"], hk, r, 1)
        out[q + "gdn/conv1d"] = np.concatenate([conv[: 2 * kd], tiled_to_grouped(conv[2 * kd :], hk, r, dv)])
        out[q + "gdn/dt_bias"] = tiled_to_grouped(g[b + "ssm_dt.bias"], hk, r, 1)
        out[q + "gdn/a_log"] = np.log(-tiled_to_grouped(g[b + "ssm_a"], hk, r, 1).astype(np.float64))
        out[q + "gdn/norm"] = g[b + "ssm_norm.weight"]
        ssm_out = g[b + "ssm_out.weight"]
        out[q + "gdn/output"] = ssm_out if grouped_out else tiled_to_grouped(ssm_out, hk, r, dv, axis=1)
    return out


def compare(got, ref, exact=True):
    assert got.keys() == ref.keys()
    for name, value in ref.items():
        if name.endswith("/a_log"):
            np.testing.assert_allclose(got[name], value, rtol=2e-7, err_msg=name)
        elif exact:
            np.testing.assert_array_equal(got[name], value, err_msg=name)
        else:
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_bonsai_gguf_per_type_decodes_to_the_reference(tmp_path, name):
    cfg = bonsai.config()
    path = bonsai.write_gguf(tmp_path / f"{name}.gguf", cfg, ternary_type=name)
    reader, g, types = read_bonsai(path, name)
    kinds = {t for t in types.values()}
    assert kinds == {0, 30, GEOMETRY[name][0]}  # F32, BF16 gates, one ternary type
    assert types["token_embd.weight"] == types["output.weight"] == types["blk.0.attn_qkv.weight"] == GEOMETRY[name][0]
    assert types["blk.0.ssm_beta.weight"] == 30 and types["blk.0.ssm_conv1d.weight"] == 0
    assert len(types) == 3 * 14 + 11 + 3 and reader.fields["general.architecture"].contents() == "qwen35"
    assert "prism.hadamard.version" not in reader.fields
    ref = bonsai.logical_parameters(cfg, ternary_type=name)
    compare(undo(g, cfg), ref)
    assert ref == {} or set(np.unique(np.sign(ref["text/layers/0/mlp/up"]))) <= {-1.0, 0.0, 1.0}
    if name in ("TQ1_0", "TQ2_0"):  # gguf-py reads these itself
        for t in GGUFReader(path).tensors:
            if t.tensor_type == Q[name]:
                np.testing.assert_array_equal(dequantize(t.data, t.tensor_type).reshape(g[t.name].shape), g[t.name])


def test_bonsai_values_are_ternary_times_a_block_scale():
    cfg = bonsai.config()
    ref = bonsai.logical_parameters(cfg, ternary_type="PTQ1_0")
    up = ref["text/layers/1/mlp/up"].reshape(512, 2, 128)
    d = np.abs(up).max(axis=-1, keepdims=True)
    assert np.all(d > 0) and np.array_equal(up / d, np.rint(up / d)) and np.abs(np.rint(up / d)).max() == 1
    assert len(np.unique(d)) > 500 and len(np.unique(up.reshape(512, 256), axis=0)) == 512  # swapped rows differ
    binary = bonsai.logical_parameters(cfg, ternary_type="Q1_0")["text/layers/1/mlp/up"]
    assert np.all(binary != 0)
    with pytest.raises(ValueError, match="multiple of"):
        bonsai.write_gguf("/nonexistent/x.gguf", bonsai.config(hidden=384), ternary_type="TQ1_0")


def hadamard_matrix(n):
    r = np.arange(n)[:, None] & np.arange(n)[None, :]
    parity = np.zeros_like(r)
    while r.any():
        parity ^= r & 1
        r >>= 1
    return np.where(parity, -1.0, 1.0) / np.sqrt(n)


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    cfg = bonsai.rotated_config()
    path = bonsai.write_gguf(tmp_path_factory.mktemp("rot") / "r.gguf", cfg, ternary_type="PTQ1_0", rotated=True)
    return cfg, path, read_bonsai(path, "PTQ1_0")


def test_rotated_metadata(rotated):
    cfg, _, (reader, g, types) = rotated
    f = reader.fields
    assert f["prism.hadamard.version"].types == [GGUFValueType.UINT32] and f["prism.hadamard.version"].contents() == 1
    assert f["prism.hadamard.block_size"].contents() == 1024
    assert f["prism.hadamard.transform"].contents() == "normalized-sylvester-walsh-hadamard"
    assert f["prism.hadamard.axis"].contents() == "input-last-dimension"
    assert f["prism.hadamard.sign_mode"].contents() == "explicit"
    assert f["prism.hadamard.gdn_v_grouped"].contents() is True
    assert f["prism.hadamard.sign_widths"].types == [GGUFValueType.ARRAY, GGUFValueType.INT32]
    widths, values = f["prism.hadamard.sign_widths"].contents(), f["prism.hadamard.sign_values"].contents()
    assert widths == [1024, 2048, 3072] and len(values) == 6144 and set(values) == {-1, 1}
    ternary = {n for n, t in types.items() if t == 143}
    assert set(f["prism.hadamard.weight_names"].contents()) == ternary - {"token_embd.weight"}
    assert f["prism.hadamard.inverse_weight_names"].contents() == ["token_embd.weight"]
    signs = bonsai.hadamard_signs(cfg)
    np.testing.assert_array_equal(np.concatenate(list(signs.values())), values)


def test_rotated_rows_undo_to_the_hf_values(rotated):
    cfg, _, (reader, g, _) = rotated
    widths = reader.fields["prism.hadamard.sign_widths"].contents()
    flat = np.asarray(reader.fields["prism.hadamard.sign_values"].contents(), np.float64)
    signs = dict(zip(widths, np.split(flat, np.cumsum(widths)[:-1]), strict=True))
    h32 = hadamard_matrix(32)  # Sylvester: H_1024 = H_32 ⊗ H_32, so H w = H_32 · W · H_32 for W = w as 32 × 32
    rotated_names = set(reader.fields["prism.hadamard.weight_names"].contents()) | {"token_embd.weight"}
    primal = {}
    for name, w in g.items():
        if name in rotated_names:  # w = s ⊙ H(w') per 1024-block of each row
            blocks = h32 @ w.astype(np.float64).reshape(w.shape[0], -1, 32, 32) @ h32
            primal[name] = (blocks.reshape(w.shape) * signs[w.shape[1]]).astype(np.float32)
        else:
            primal[name] = w
    compare(undo(primal, cfg, grouped_out=True), bonsai.logical_parameters(cfg, rotated=True), exact=False)
    stored = bonsai.stored_parameters(cfg, rotated=True)  # the rotated rows themselves, exactly
    compare(undo(g, cfg, grouped_out=True), stored)
    up = stored["text/layers/0/mlp/up"].reshape(3072, 8, 128)
    assert np.array_equal(np.abs(up) / np.abs(up).max(axis=-1, keepdims=True) % 1, np.zeros_like(up))


def test_fwht_is_the_normalized_sylvester_transform():
    h32 = hadamard_matrix(32)
    np.testing.assert_allclose(np.kron(h32, h32), hadamard_matrix(1024), atol=1e-15)  # the test's fast undo
    x = np.random.default_rng(3).standard_normal((3, 2048))
    np.testing.assert_allclose(bonsai.fwht(x), (x.reshape(3, 2, 1024) @ hadamard_matrix(1024)).reshape(3, 2048), atol=1e-12)
    np.testing.assert_allclose(bonsai.fwht(bonsai.fwht(x)), x, atol=1e-12)  # involutory


def test_bonsai_determinism_and_qwen35_shape(tmp_path):
    a = bonsai.write_gguf(tmp_path / "a.gguf", ternary_type="PQ2_0").read_bytes()
    b = bonsai.write_gguf(tmp_path / "b.gguf", ternary_type="PQ2_0").read_bytes()
    c = bonsai.write_gguf(tmp_path / "c.gguf", ternary_type="PQ2_0", seed=1).read_bytes()
    assert a == b and a != c
    assert bonsai.config()["model_type"] == qwen35.config()["model_type"]
