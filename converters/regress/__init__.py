"""Recipe regression (``convert regress``): every case converted, verified and pinned by per-object digests.

- :mod:`converters.regress.cases` — the case file ``recipes/regression.yaml`` (fixtures × recipes × options);
- :mod:`converters.regress.fixtures` — deterministic sources from :mod:`tinymodels`;
- :mod:`converters.regress.digest` — what is pinned (format, layout, shape, bytes, SHA-256 per object;
  bindings, uses, components) and how a change is explained (decoded statistics and error against the
  source, old → new);
- :mod:`converters.regress.runner` — convert, ``convert verify``, compare with
  ``recipes/regression/expected/<case>.json`` or rewrite it (``--update``).

``make test`` runs every case (``tests/test_regress_cases.py``), so CI fails on any unintended change
of any recipe's output; an intended one is accepted by ``convert regress --update`` and reviewed in the
diff of the expectation files.
"""

from converters.regress.cases import CASES_FILE, EXPECTED_DIR, Case, load_cases
from converters.regress.runner import CaseResult, run_case, run_cases

__all__ = ["CASES_FILE", "EXPECTED_DIR", "Case", "CaseResult", "load_cases", "run_case", "run_cases"]
