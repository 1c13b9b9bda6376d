"""Scale-out conversion: plan → encode → seal.

1. **plan** (:func:`converters.scaleout.job.stage`): open the source once, plan every object and the
   whole directory — offsets, files table, JSON reservation — exactly as ``convert`` does, create the
   pre-allocated files in a staging directory (:class:`ninfer_core.container.staging.StagedArtifact`)
   and write a plan file (:mod:`converters.scaleout.planfile`) naming the request and a fingerprint.
2. **encode** (:func:`converters.scaleout.job.encode`): any process that sees the files — a thread pool
   here, Dask workers (:mod:`converters.scaleout.dask_backend`), or ``convert encode PLAN --shard K/N``
   on several machines over a shared file system — re-plans from the request, refuses a plan that no
   longer matches (source or code changed), and writes each object it is given at its planned offset,
   measuring errors as it goes; a marker per object records its size, SHA-256 and error.
3. **seal** (:func:`converters.scaleout.job.seal`): checks that every object is marked, puts the
   measured errors into the reserved provenance, derives the content ID when asked, and publishes.

The result is byte-identical to ``convert gguf2ninfer`` / ``st2ninfer`` with the same inputs and
``--artifact-id`` / ``--artifact-id-from-content`` (tests/test_scaleout_*.py): the directory is planned
the same way (:mod:`converters.scaleout.reservation`) and every object is produced by the same code.
The commands' library calls are in :mod:`converters.scaleout.run`: ``run_conversion`` (a conversion here
or staged, as ``gguf2ninfer`` / ``st2ninfer`` ask), ``run_staged`` and ``encode_staged``.
This package imports nothing at load time, so :mod:`converters.pipeline.convert` can use the reservation.
"""
