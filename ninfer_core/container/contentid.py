"""Content-derived ``artifact_id``: an ID that is a digest of everything else in the file set (§2.1, §3).

The container only asks that ``artifact_id`` be the same 16 bytes in the entry and every part header
(§3.1, §3.2). A writer may take it from a random UUID or, for reproducible builds, from the content.
Rule (``ninfer-content-id/v1``)::

    digest = SHA-256( "ninfer-content-id/v1\\0"
                      ‖ json_bytes as U64 little-endian ‖ the JSON text as stored (padding included)
                      ‖ for each object in directory order: SHA-256(the object's encoded bytes) )
    artifact_id = digest[:16] with the RFC 9562 version nibble set to 8 and the variant bits to 10

Everything else in the files follows from these inputs: the headers hold only magic, ``json_bytes``,
part indexes and the ID; the directory fixes every offset, file size and name; alignment zones and gaps
between objects are zero (§3.1, §5.3). So two file sets with the same content ID are byte-identical
(barring a SHA-256 collision), whatever the number of workers or the order of writes.

Per-object digests are what makes the ID computable *while* writing: each object is written by one
task in order, so its digest is taken as its bytes go out, in any object order, in any process; the
final hash over the JSON and the digests is computed at commit and written into the headers last.
:func:`content_id_of` recomputes the ID of a published artifact (reading every object once).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

DOMAIN = b"ninfer-content-id/v1\x00"
READ_CHUNK = 16 << 20


def content_artifact_id(json_text: bytes, object_digests: Iterable[bytes]) -> bytes:
    """The 16-byte content ID from the stored JSON text and the objects' SHA-256 digests (directory order)."""
    h = hashlib.sha256(DOMAIN)
    h.update(struct.pack("<Q", len(json_text)))
    h.update(json_text)
    for d in object_digests:
        if len(d) != 32:
            raise ValueError(f"object digests are 32-byte SHA-256 values, got {len(d)} bytes")
        h.update(d)
    raw = bytearray(h.digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x80  # version 8: custom (RFC 9562 §5.8)
    raw[8] = (raw[8] & 0x3F) | 0x80  # variant 10
    return bytes(raw)


def object_digest(artifact, record) -> bytes:
    """SHA-256 of one object's bytes as stored, read in bounded chunks."""
    h = hashlib.sha256()
    buf = memoryview(bytearray(min(READ_CHUNK, max(record.bytes, 1))))
    for off in range(0, record.bytes, len(buf)):
        piece = buf[:min(len(buf), record.bytes - off)]
        artifact.readinto(record.offset + off, piece)
        h.update(piece)
    return h.digest()


def content_id_of(artifact) -> str:
    """Recompute the content ID (hex) of an open :class:`~ninfer_core.Artifact` from its JSON and objects.

    Equal to ``artifact.artifact_id`` exactly when the artifact was written with a content-derived ID and
    nothing changed since."""
    with open(artifact.path, "rb") as f:
        f.seek(32)
        json_text = f.read(artifact.json_bytes)
    return content_artifact_id(json_text, (object_digest(artifact, o) for o in artifact.objects)).hex()
