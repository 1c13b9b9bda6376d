"""llama.cpp's handcrafted GGUF files, regenerated here: the peer's own reader test suite as test input.

A port, written from a reading of llama.cpp's ``tests/test-gguf.cpp`` (``get_handcrafted_file``, the
``handcrafted_file_type`` kinds, ``get_tensor_configs``, ``get_kv_types``, ``expect_context_not_null``), of
how that suite builds its files from a seed, so that the files are the ones its C++ builds (docs/inspect.md
§Agreement with llama.cpp's GGUF tests):

- ``std::mt19937`` seeded with the seed (:class:`MT19937`), ``rng()`` being one 32-bit output;
- ``std::shuffle`` as libstdc++ (GCC 12) implements it: ranges below 2^16 swap two positions per draw,
  ``uniform_int_distribution`` downscales a 32-bit engine with Lemire's multiply-shift (:func:`shuffle`);
- ggml's type table at the revision ported (ids 0-41, ``GGML_TYPE_COUNT`` 42, Q8_1 36 bytes per 32, the
  removed ids 4, 5, 31-33 and 36-38 of size 0) and GGUF's 13 value types.

Checked against the C++ standard library: the engine's outputs and shuffles of 1, 2, 7, 93 and 100
elements were compared with a g++ 12 build for seeds 0, 1, 2 and 12345 (the values are in
``tests/sources/test_gguf_peer_suite.py``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32
GGML_MAX_DIMS = 4
ALIGNMENT_KEY = b"general.alignment"

# ggml type id -> (block elements, block bytes); ids absent here have ggml_type_size 0 (removed types)
GGML_TYPES: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
    23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18),
}
GGML_TYPE_COUNT = 42
GGML_TYPE_I8, GGML_TYPE_I64 = 24, 27

# GGUF value types: UINT8 INT8 UINT16 INT16 UINT32 INT32 FLOAT32 BOOL STRING ARRAY UINT64 INT64 FLOAT64
GGUF_TYPE_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 8: 0, 9: 0, 10: 8, 11: 8, 12: 8}
GGUF_TYPE_UINT32, GGUF_TYPE_INT32, GGUF_TYPE_STRING, GGUF_TYPE_ARRAY = 4, 5, 8, 9
GGUF_TYPE_COUNT = 13

OFFSET_HAS_KV, OFFSET_HAS_TENSORS, OFFSET_HAS_DATA = 1000, 2000, 3000


@dataclass(frozen=True)
class Kind:
    """One ``handcrafted_file_type``: its number, the suite's name, and whether ggml loads the file."""

    value: int
    name: str

    @property
    def expect_loaded(self) -> bool:
        """``expect_context_not_null``: the SUCCESS / CUSTOM_ALIGN / random-KV kinds, HEADER_EMPTY, ZERO_DIM."""
        if self.name == "TENSORS_ZERO_DIM":
            return True
        return self.value % 1000 >= 800

    @property
    def has_kv(self) -> bool:
        return self.value >= OFFSET_HAS_KV

    @property
    def has_tensors(self) -> bool:
        return self.value >= OFFSET_HAS_TENSORS

    @property
    def has_data(self) -> bool:
        return self.value >= OFFSET_HAS_DATA


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind(10, "HEADER_BAD_MAGIC"), Kind(15, "HEADER_BAD_VERSION_0"), Kind(20, "HEADER_BAD_VERSION_1"),
    Kind(30, "HEADER_BAD_VERSION_FUTURE"), Kind(40, "HEADER_BAD_N_TENSORS"), Kind(50, "HEADER_BAD_N_KV"),
    Kind(800, "HEADER_EMPTY"),
    Kind(1010, "KV_BAD_KEY_SIZE"), Kind(1015, "KV_EMPTY_KEY"), Kind(1020, "KV_BAD_TYPE"),
    Kind(1040, "KV_DUPLICATE_KEY"), Kind(1050, "KV_BAD_ALIGN"), Kind(1055, "KV_WRONG_TYPE_ALIGN"),
    Kind(1800, "KV_RANDOM_KV"),
    Kind(2010, "TENSORS_BAD_NAME_SIZE"), Kind(2020, "TENSORS_BAD_N_DIMS"), Kind(2030, "TENSORS_BAD_SHAPE"),
    Kind(2035, "TENSORS_ZERO_DIM"), Kind(2040, "TENSORS_NE_TOO_BIG"), Kind(2045, "TENSORS_NBYTES_TOO_BIG"),
    Kind(2050, "TENSORS_BAD_TYPE"), Kind(2060, "TENSORS_BAD_OFFSET"), Kind(2070, "TENSORS_DUPLICATE_NAME"),
    Kind(2075, "TENSORS_BAD_ALIGN"), Kind(2080, "TENSORS_INCONSISTENT_ALIGN"), Kind(2800, "TENSORS_SUCCESS"),
    Kind(2810, "TENSORS_CUSTOM_ALIGN"),
    Kind(3010, "DATA_NOT_ENOUGH_DATA"), Kind(3015, "DATA_BAD_ALIGN"), Kind(3020, "DATA_INCONSISTENT_ALIGN"),
    Kind(3030, "DATA_MEM_SIZE_OVERFLOW"), Kind(3800, "DATA_SUCCESS"), Kind(3810, "DATA_CUSTOM_ALIGN"),
)}
# the kinds whose file declares general.alignment (1 where the file is expected to load, else 13)
ALIGN_KINDS = {"KV_BAD_ALIGN", "KV_WRONG_TYPE_ALIGN", "TENSORS_BAD_ALIGN", "TENSORS_CUSTOM_ALIGN",
               "DATA_BAD_ALIGN", "DATA_CUSTOM_ALIGN"}


class MT19937:
    """``std::mt19937`` (32-bit Mersenne Twister, ``init_genrand`` seeding); calling it is ``rng()``."""

    def __init__(self, seed: int) -> None:
        self.seed(seed)

    def seed(self, seed: int) -> None:
        mt = [seed & 0xFFFFFFFF]
        for i in range(1, 624):
            mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
        self.mt, self.index = mt, 624

    def _twist(self) -> None:
        mt = self.mt
        for i in range(624):
            y = (mt[i] & 0x80000000) | (mt[(i + 1) % 624] & 0x7FFFFFFF)
            mt[i] = mt[(i + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
        self.index = 0

    def __call__(self) -> int:
        if self.index >= 624:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        return y ^ (y >> 18)


def uniform_int(rng: MT19937, low: int, high: int) -> int:
    """libstdc++ ``uniform_int_distribution<uint64>{low, high}(rng)`` for a 32-bit engine, range < 2^32."""
    span = high - low + 1
    product = rng() * span
    if product & 0xFFFFFFFF < span:
        threshold = (-span & 0xFFFFFFFF) % span
        while product & 0xFFFFFFFF < threshold:
            product = rng() * span
    return low + (product >> 32)


def shuffle(items: list, rng: MT19937) -> None:
    """libstdc++ ``std::shuffle`` (two swap positions per draw when n * n fits the engine's range)."""
    n = len(items)
    if n < 2:
        return
    i = 1
    if n % 2 == 0:
        j = uniform_int(rng, 0, 1)
        items[i], items[j] = items[j], items[i]
        i += 1
    while i != n:
        b0 = i + 1
        x = uniform_int(rng, 0, b0 * (b0 + 1) - 1)
        for pos in (x // (b0 + 1), x % (b0 + 1)):
            items[i], items[pos] = items[pos], items[i]
            i += 1


def tensor_configs(rng: MT19937) -> list[tuple[int, list[int]]]:
    """``get_tensor_configs``: up to 100 (ggml type, 4-dim shape) pairs, removed types skipped."""
    out = []
    for _ in range(100):
        t = rng() % GGML_TYPE_COUNT
        if t not in GGML_TYPES:
            continue
        shape = [1, 1, 1, 1]
        shape[0] = (1 + rng() % 10) * GGML_TYPES[t][0]
        n_dims = 1 + rng() % GGML_MAX_DIMS
        for i in range(1, n_dims):
            shape[i] = 1 + rng() % 10
        out.append((t, shape))
    return out


def kv_types(rng: MT19937) -> list[tuple[int, int]]:
    """``get_kv_types``: (value type, array element type or -1) pairs, then shuffled. The C++ takes the
    engine *by value*: the caller's engine does not advance."""
    rng = _copy(rng)
    out = []
    for _ in range(100):
        t = rng() % GGUF_TYPE_COUNT
        if t == GGUF_TYPE_ARRAY:
            ta = rng() % GGUF_TYPE_COUNT
            if ta == GGUF_TYPE_ARRAY:
                continue
            out.append((t, ta))
            continue
        out.append((t, -1))
    shuffle(out, rng)
    return out


def _copy(rng: MT19937) -> MT19937:
    c = MT19937.__new__(MT19937)
    c.mt, c.index = list(rng.mt), rng.index
    return c


def row_size(t: int, ne: int) -> int:
    blck, size = GGML_TYPES[t]
    return size * (ne // blck)


def _pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


def handcrafted_file(seed: int, kind: str) -> bytes:
    """The bytes ``get_handcrafted_file(seed, kind)`` writes (``extra_bytes`` 0)."""
    k = KINDS[kind]
    rng = MT19937(seed)
    out = bytearray()
    alignment = DEFAULT_ALIGNMENT

    def w(fmt: str, *v) -> None:
        out.extend(struct.pack("<" + fmt, *v))

    def pad_to(a: int) -> None:
        out.extend(b"\0" * (_pad(len(out), a) - len(out)))

    out += b"FUGG" if kind == "HEADER_BAD_MAGIC" else b"GGUF"
    w("I", {"HEADER_BAD_VERSION_0": 0, "HEADER_BAD_VERSION_1": 1,
            "HEADER_BAD_VERSION_FUTURE": GGUF_VERSION + 1}.get(kind, GGUF_VERSION))

    configs = tensor_configs(rng) if k.has_tensors else []
    if kind == "DATA_MEM_SIZE_OVERFLOW":
        configs = [(GGML_TYPE_I8, [0x7FFFFFFFFFFFFFC0, 1, 1, 1])] * 2
    w("Q", 2**64 - 1 if kind == "HEADER_BAD_N_TENSORS" else len(configs))

    kvs = kv_types(rng) if k.has_kv else []
    n_kv = len(kvs) + (1 if kind in ALIGN_KINDS else 0)
    w("Q", 2**64 - 1 if kind == "HEADER_BAD_N_KV" else n_kv)

    if not k.has_kv:
        pad_to(alignment)
        return bytes(out)

    for i, (vtype, atype) in enumerate(kvs):
        if kind == "KV_BAD_TYPE":
            vtype = atype = GGUF_TYPE_COUNT
        key = b"" if kind == "KV_EMPTY_KEY" else b"my_key_%d" % (i // 2 if kind == "KV_DUPLICATE_KEY" else i)
        w("Q", 2**64 - 1 if kind == "KV_BAD_KEY_SIZE" else len(key))
        out += key
        w("i", vtype)
        data = [rng() for _ in range(16)]
        if GGUF_TYPE_STRING in (vtype, atype):
            data = [d | 0x01010101 for d in data]  # no NUL inside the strings
        blob = struct.pack("<16I", *data)
        if vtype == GGUF_TYPE_STRING:
            n = rng() % len(blob)
            w("Q", n)
            out += blob[:n]
            continue
        if vtype == GGUF_TYPE_ARRAY:
            w("i", atype)
            if atype == GGUF_TYPE_STRING:
                nstr = rng() % 17
                w("Q", nstr)
                for istr in range(nstr):
                    n = rng() % 5
                    w("Q", n)
                    out += blob[4 * istr:4 * istr + n]
                continue
            size = GGUF_TYPE_SIZE[atype]
            n = (rng() % len(blob)) // size
            w("Q", n)
            out += blob[:n * size]
            continue
        out += blob[:1 if kind == "KV_BAD_TYPE" else GGUF_TYPE_SIZE[vtype]]

    if kind in ALIGN_KINDS:
        w("Q", len(ALIGNMENT_KEY))
        out += ALIGNMENT_KEY
        w("i", GGUF_TYPE_INT32 if kind == "KV_WRONG_TYPE_ALIGN" else GGUF_TYPE_UINT32)
        alignment = 1 if k.expect_loaded else 13
        w("I", alignment)

    if not k.has_tensors:
        pad_to(alignment)
        return bytes(out)

    if kind in ("TENSORS_INCONSISTENT_ALIGN", "DATA_INCONSISTENT_ALIGN"):
        alignment = 1

    offset = 0
    for i, (t, shape) in enumerate(configs):
        if kind == "TENSORS_NBYTES_TOO_BIG":
            t = GGML_TYPE_I64
        name = b"my_tensor" if kind == "TENSORS_DUPLICATE_NAME" else b"my_tensor_%d" % i
        if kind == "TENSORS_BAD_NAME_SIZE":
            name += b"_with_a_very_long_name_which_is_longer_than_what_is_allowed_for_ggml_tensors"
        w("Q", len(name))
        out += name
        n_dims = 2 if kind in ("TENSORS_NE_TOO_BIG", "TENSORS_NBYTES_TOO_BIG") else 1
        for d in range(GGML_MAX_DIMS - 1, 0, -1):
            if shape[d] != 1:
                n_dims = d + 1
                break
        if kind == "TENSORS_ZERO_DIM":
            n_dims = 2
        w("I", GGML_MAX_DIMS + 1 if kind == "TENSORS_BAD_N_DIMS" else n_dims)
        if kind == "TENSORS_BAD_SHAPE":
            dims = [-1] * n_dims
        elif kind == "TENSORS_ZERO_DIM":
            dims = [shape[0], 0]
        elif kind == "TENSORS_NE_TOO_BIG":
            dims = [4 * (2**31 - 1)] * n_dims
        elif kind == "TENSORS_NBYTES_TOO_BIG":
            big_ne = (2**64 - 1) // GGML_TYPES[t][1]
            # int64_t(1.01f * std::pow(big_ne, 1.0f/n_dims)): pow in double, the two factors binary32
            dims = [_pad(int(_f32(1.01) * float(big_ne) ** _f32(1.0 / n_dims)) + 1, GGML_TYPES[t][0])] * n_dims
        else:
            dims = shape[:n_dims]
        w(f"{len(dims)}q", *dims)
        w("i", GGML_TYPE_COUNT if kind == "TENSORS_BAD_TYPE" else t)
        w("Q", 2**64 - 1 if kind == "TENSORS_BAD_OFFSET" else offset)
        ne = 0 if kind == "TENSORS_ZERO_DIM" else _product(shape[:n_dims])
        offset += _pad(row_size(t, ne), alignment)

    pad_to(alignment)
    if k.has_data:
        nbytes = {"DATA_NOT_ENOUGH_DATA": offset - 1, "DATA_MEM_SIZE_OVERFLOW": 32}.get(kind, offset)
        out += bytes(i % 256 for i in range(nbytes))
    return bytes(out)


def _product(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _f32(x: float) -> float:
    """``x`` rounded to binary32, as the C++ ``float`` arithmetic of TENSORS_NBYTES_TOO_BIG does."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected_tensors(seed: int, kind: str) -> list[dict]:
    """The tensor table the suite's ``handcrafted_check_tensors`` expects of a loaded file: name, type,
    dims as written, and relative offset."""
    rng = MT19937(seed)
    configs = tensor_configs(rng)
    alignment = 1 if kind in ALIGN_KINDS else DEFAULT_ALIGNMENT
    rows, offset = [], 0
    for i, (t, shape) in enumerate(configs):
        n_dims = 2 if kind == "TENSORS_ZERO_DIM" else next((d + 1 for d in range(3, 0, -1) if shape[d] != 1), 1)
        dims = [shape[0], 0] if kind == "TENSORS_ZERO_DIM" else shape[:n_dims]
        rows.append({"name": f"my_tensor_{i}", "type_id": t, "dims": dims, "relative_offset": offset})
        if kind != "TENSORS_ZERO_DIM":
            offset += _pad(row_size(t, _product(shape)), alignment)
    return rows
