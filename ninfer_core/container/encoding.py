"""Interpreting an object's encoding through the codec registry (container spec §5.3, §6, §11.1).

The generic reader keeps unknown ``format``/``layout``/``encoding`` names as they are; they are
reported only when an object is *interpreted* — read for decoding, materialised or validated (§11.1,
§12.6 row 5). Interpreting a tensor checks that the codec knows the (format, layout), that the shape and
``divisors`` are allowed (§6.2) and that ``bytes`` equals the encoded size (§5.3). All size arithmetic
lives in :mod:`ninfer_core.codecs`; this module only adds the object's JSON path and file.
"""

from __future__ import annotations

from ninfer_core.container.records import RAW_BYTES, PhysicalObject, TensorObject
from ninfer_core.errors import EncodingError
from ninfer_core.findings import Finding


def check_object_encoding(obj: PhysicalObject, *, json_path: str, file: str | None) -> None:
    """Raise :class:`EncodingError` unless ``obj`` can be interpreted and its ``bytes`` is its encoded size."""
    if not isinstance(obj, TensorObject):
        if obj.encoding != RAW_BYTES:
            raise EncodingError(f"resource {obj.id!r} uses unknown encoding {obj.encoding!r} (known: {RAW_BYTES})",
                                file=file, json_path=f"{json_path}.encoding", section="§5.2",
                                rule="unknown_encoding")
        return
    from ninfer_core import codecs

    try:
        size = codecs.encoded_size(obj.format, obj.layout, obj.shape, obj.divisors)
    except EncodingError as exc:
        raise EncodingError(f"object {obj.id!r} ({obj.format} / {obj.layout}, shape {list(obj.shape)}): "
                            f"{exc.message}", file=file, json_path=json_path, section=exc.section or "§6",
                            rule=exc.rule or "unknown_encoding") from None
    if size != obj.bytes:
        raise EncodingError(f"object {obj.id!r} has bytes = {obj.bytes}, but {obj.format} / {obj.layout} of shape "
                            f"{list(obj.shape)} (divisors {obj.divisors}) encodes to {size} bytes",
                            file=file, json_path=f"{json_path}.bytes", section="§5.3", rule="object_encoded_size")


def codec_findings(obj: TensorObject, data, *, json_path: str, file: str | None) -> list[Finding]:
    """The codec's validity findings for an object's encoded bytes (invalid codes, scales, padding)."""
    from ninfer_core import codecs

    found = codecs.check(obj.format, obj.layout, obj.shape, data, obj.divisors, json_path=json_path)
    return [Finding(f.rule, f.severity, json_path, f"object {obj.id!r}: {f.message}", f.section, file)
            for f in found]
