"""What ``convert recipes`` and ``convert formats`` list: the shipped recipes (what each stores) and every
storage format (bits per weight, group, layout, and which source types it holds exactly).

Both read the registries the converter itself uses — :func:`converters.mapping.recipes.list_recipes` /
:func:`~converters.mapping.recipes.load_recipe` and :func:`ninfer_core.codecs.traits.all_traits` with the
exact transcoding table :data:`ninfer_core.codecs.transcode.TRANSCODES` — so the listing cannot drift from
what a conversion does (docs/recipes.md, docs/format/codec-traits.md, docs/format/transcoding.md).
"""

from __future__ import annotations

from converters.mapping.recipes import list_recipes, load_recipe


def recipe_rows() -> list[dict]:
    """One entry per shipped recipe: name, description, file, the role table and the groups."""
    out = []
    for name in list_recipes():
        r = load_recipe(name)
        out.append({"name": r.name, "description": " ".join(r.description.split()), "file": f"recipes/{name}.yaml",
                    "encoder": r.encoder, "activation_policy": r.activation_policy,
                    "exact_transcoding": r.exact_transcoding, "golden_budget": r.budget_json(),
                    "roles": {s.pattern: (f"same_as {s.same_as}" if s.same_as else s.format) for s in r.roles},
                    "groups": {g.key: {"members": list(g.members), "format": g.format} for g in r.groups}})
    return out


def format_rows() -> list[dict]:
    """One entry per registered format: layout, bits per weight, group, row tile, tolerance class, the GGML
    type it passes through, and the source types it holds exactly (with ``bit_exact`` / ``value_exact``)."""
    from ninfer_core.codecs.traits import all_traits
    from ninfer_core.codecs.transcode import TRANSCODES

    exact: dict[str, dict[str, str]] = {}
    for (source, target), path in TRANSCODES.items():
        exact.setdefault(target, {})[source] = path.exactness
    return [{"format": f, "layout": t.layout, "bits_per_weight": t.bits_per_weight, "group": t.group,
             "row_tile": t.row_tile, "tolerance_class": t.tolerance_class, "ggml_passthrough": t.ggml_type
             if t.ggml_passthrough else None, "exact_from": exact.get(f, {})} for f, t in all_traits().items()]
