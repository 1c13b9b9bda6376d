"""Robustness: any damaged directory or header gives a typed error, never a bare exception.

Random JSON values are put at random places of a valid directory, and random bytes are overwritten in
the entry's header and JSON text. ``open_artifact`` must then either succeed (and every read either
succeeds or raises a :class:`NinferError`) or raise a :class:`NinferError`; ``validate`` never raises.
"""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ninfer_core import open_artifact, validate
from ninfer_core.errors import NinferError
from tests.support.container import base_payload, base_root, entry_file

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=6) | st.sampled_from(["w.a", "w.b", "r.t", "tensor", "resource", "text/a", "fp32"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


BASE = base_root([len(base_payload())])
PATHS = [p for p in _paths(BASE) if p]


def _exercise(path) -> None:
    try:
        art = open_artifact(path)
    except NinferError:
        pass
    else:
        with art:
            for obj in art.objects:
                for read in (lambda o=obj: art.object_bytes(o.id), lambda o=obj: art.read_range(o.offset, o.bytes)):
                    try:
                        read()
                    except NinferError:
                        pass
            for name in art.bindings:
                try:
                    art.binding_array(name)
                except NinferError:
                    pass
    assert isinstance(validate(path), list)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(PATHS), value=json_values, delete=st.booleans())
def test_random_directory_values(tmp_path, where, value, delete):
    root = copy.deepcopy(BASE)
    node = root
    for key in where[:-1]:
        node = node[key]
    if delete and isinstance(node, dict):
        del node[where[-1]]
    else:
        node[where[-1]] = value
    path = tmp_path / "a.ninfer"
    path.write_bytes(entry_file(json.dumps(root).encode(), base_payload()))
    _exercise(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(min_value=0, max_value=1100), st.integers(0, 255)), min_size=1,
                      max_size=6))
def test_random_header_and_json_bytes(tmp_path, edits):
    data = bytearray(entry_file(BASE, base_payload()))
    for pos, byte in edits:
        data[pos] = byte
    path = tmp_path / "a.ninfer"
    path.write_bytes(bytes(data))
    _exercise(path)
