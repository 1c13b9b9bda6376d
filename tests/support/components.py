"""Checks shared by the component tests: cosine similarity, and that components bind only their own objects."""

from __future__ import annotations

import numpy as np


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return 1.0 if na == nb == 0 else float(a @ b / (na * nb))


def referenced_objects(binding) -> set[str]:
    return {binding.object} if binding.object is not None else {p.object for p in binding.parts}


def check_separation(artifact, shared: dict[str, str] | None = None) -> None:
    """Every object is owned by one component prefix; a binding of component ``c`` references only ``c/...``
    objects, except the names in ``shared`` (binding → the text object it must reference)."""
    shared = shared or {}
    prefixes = {o.id.split("/")[0] for o in artifact.objects}
    assert prefixes <= {"text", "mtp", "vision", "dflash", "dflash2", "proposal", "frontend"}, prefixes
    for name, binding in artifact.bindings.items():
        refs = referenced_objects(binding)
        if name in shared:
            assert refs == {shared[name]}, (name, refs)
            continue
        owner = name.split("/")[0]
        assert all(r.split("/")[0] == owner for r in refs), (name, refs)
