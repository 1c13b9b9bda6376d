"""Acceptance: is a written artifact right? ``check`` (the read-only self-test of a conversion),
``gates`` (``convert verify``'s gates and the ``.ninfer`` validator's), ``golden`` (the reference forward),
``calbin`` (static acceptance of compiled packages) and ``report`` (the one findings/report model)."""
