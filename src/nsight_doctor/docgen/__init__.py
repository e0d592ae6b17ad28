"""Docs generated from the code's own data, so that they cannot drift: ``rules`` renders a rule
file as its page (what ``rules explain`` prints), ``pages`` every reference page, and
``python -m nsight_doctor.docgen`` rewrites them (``--check``: exits 1 when one is stale)."""
