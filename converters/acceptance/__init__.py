"""Acceptance: is a written artifact right? ``registry`` (every gate of check, verify and validate, and the loop
that runs a command's gates), ``check`` (the read-only self-test of a conversion), ``gates`` (the checks
``convert verify``'s and the ``.ninfer`` validator's gates are built from), ``validate_ninfer``, ``golden`` (the
reference forward), ``calbin`` (static acceptance of compiled packages) and ``report`` (the one finding and
report model). How they relate: docs/acceptance.md."""
