"""The conformance kit: hold anyone's embedding or positional encoding to the suite's contract.

From Python (``api``, ``testing``): ``check(implementation, kind, ...)`` returns a report,
``assert_conforms`` raises with the first mismatch, ``parametrize_with_checks`` gives one
pytest test per check. From the command line:

``compare.py check TARGET --kind KIND`` imports TARGET (``path/to/file.py:NAME`` or
``package.module:NAME``) in a worker process, calls it on a battery of cases and holds every
result to the suite's float64 reference (``backends.positional``), rounded once to the dtype
tried. A result that differs is checked against the mistakes people make, by name: the RoPE
layout, angles in low precision, a position off by one, the paper's ALiBi slopes for head counts
that are not powers of two, a T5 bucket boundary, repeated ids summed once. Bad ids must raise:
a clamped, wrapped, NaN or zero row is a silent wrong answer.

Its modules, from the bottom up (each imports only those below it: docs/development.md,
"Layers"):

- ``numerics``, ``frameworks``, ``versions``: rounding and ulps; NumPy arrays into a framework's
  arrays and back, the framework detected; installed packages' versions;
- ``kinds``: the eight contracts, one module each: cases, references, tolerances, named mistakes;
- ``paths``, ``adapters``: how one call is made along a production path; the libraries' layers;
- ``worker``, ``report``: the process that imports the target and calls it, one case at a time;
  each case's verdict, one result per check, the report's lines and JSON;
- ``process``: in which process a target is called (a Worker under time limits, or in process);
- ``against``: one implementation held to another, case by case;
- ``runner``: a battery run: the cases chosen, asked eagerly and along a path, judged;
- ``api``, ``known``, ``cases``, ``testing``: the front doors: check() and assert_conforms();
  the matrix of the implementations people use; the battery as files any language can read;
  one pytest test per check.
"""

__all__ = ["Report", "assert_conforms", "check", "parametrize_with_checks"]


def __getattr__(name):  # the kit is imported on first use: its submodules stay cheap
    if name in ("check", "assert_conforms"):
        from embedding_parity.conformance import api

        return getattr(api, name)
    if name == "parametrize_with_checks":
        from embedding_parity.conformance.testing import parametrize_with_checks

        return parametrize_with_checks
    if name == "Report":
        from embedding_parity.conformance.report import Report

        return Report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
