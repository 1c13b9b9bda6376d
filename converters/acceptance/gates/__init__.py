"""Acceptance gates for ``.ninfer`` artifacts: ``convert verify`` (against the source) and ``convert validate``
(static, gates A–F), one vocabulary of finding codes (:mod:`.codes`); the gates themselves are registered in
:mod:`converters.acceptance.registry` (docs/acceptance.md §Gate registry). The checks they are built from:

- :mod:`.structure` — every container rule and the filesystem checks (verify 1 and 3; validate A, B, C, F);
- :mod:`.contract`, :mod:`.coverage` — the logical parameters an architecture requires, binding coverage;
- :mod:`.required` — the other components' parameter lists from their mapping files and configs (no source);
- :mod:`.proposal` — ``text.proposal``: its token map, its head's expected values;
- :mod:`.decode` — row blocks of a parameter from the artifact and from the source, in bounded memory;
- :mod:`.tolerance`, :mod:`.values` — values and order probes against the source (verify 4, 5);
- :mod:`.resources` — resources against the source and their recorded hashes (verify 6; validate E);
- :mod:`.numerics` — golden numerics (verify 7);
- :mod:`.capacity`, :mod:`.supply`, :mod:`.prerun` — validate D, E, F;
- :mod:`.verify_gates` — verify's seven registered gates; :mod:`.verify` — ``verify()``, its run context and report.
"""
