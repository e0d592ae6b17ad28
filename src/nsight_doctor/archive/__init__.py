"""The archive: many profiles in one fleet database.

``ingest`` is a batch driver over the same ``nsight_doctor.analyze``: worker processes (or Dask
workers) analyse the profiles and write their rows as Parquet parts, and one writer merges each
part into the fleet database in one transaction. ``query``, ``report`` and ``export`` only read
that database. The tables are documented in docs/fleet-schema.md (generated from tables/*.sql
and the typed summary) and the workflow in docs/archive.md.
"""
