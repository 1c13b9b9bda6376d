"""Recording parameter maps for the MoE golden tests: which experts a forward pass actually read."""

from __future__ import annotations

import ml_dtypes  # noqa: F401  (registers numpy bfloat16 for safetensors' numpy backend)


class Recording(dict):
    """A parameter mapping that records which names the forward read."""

    def __init__(self, *a) -> None:
        super().__init__(*a)
        self.read: set[str] = set()

    def __getitem__(self, name):
        self.read.add(name)
        return super().__getitem__(name)


def routed(params: Recording, layer: int) -> list[int]:
    return sorted({int(n.split("/")[5]) for n in params.read if n.startswith(f"text/layers/{layer}/moe/experts/")})
