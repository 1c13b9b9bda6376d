"""Encode a staged conversion on a Dask cluster (optional extra ``scale``: ``pip install 'ninfer-convert[scale]'``).

Dask (``distributed``) is used only to run the encode tasks where the workers are: the plan file and the
staging directory must be on a file system every worker sees at the same path (NFS, Lustre, a shared
volume). The objects still to write are cut into byte-balanced shares (:func:`~converters.scaleout.job.shard_of`),
a few per worker so a slow worker does not hold the end; each task is :func:`converters.scaleout.job.encode`
of one share, single-threaded (Dask runs one task per worker thread). A task that fails returns its typed
error instead of raising, so the driver reports the file, rule and object it names (a pickled exception would
lose them). Without ``scheduler`` a ``distributed.LocalCluster`` of ``workers`` processes is started and
stopped here: the same code path on one machine, as the tests use it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from converters.errors import ConversionError
from converters.scaleout.job import encode, shard_of
from converters.scaleout.planfile import PlanFile
from ninfer_core.container.staging import StagedArtifact
from ninfer_core.errors import NinferError

log = logging.getLogger(__name__)
SHARES_PER_WORKER = 2


def encode_share(plan_path: str, ids: list[str]) -> dict:
    """One Dask task: encode ``ids`` of the plan in this worker process; errors come back as data."""
    try:
        return encode(plan_path, objects=ids, workers=1)
    except NinferError as exc:
        return {"error": str(exc), "rule": exc.rule, "file": exc.file}


def encode_on_dask(plan_path: str | Path, *, scheduler: str | None = None, workers: int | None = None) -> dict:
    """Encode every object not yet written on the cluster at ``scheduler`` (or a local one); returns
    ``{"written": n, "bytes": n, "tasks": n, "workers": n}``. Seal afterwards."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConversionError("--backend dask needs the optional dependency: pip install 'ninfer-convert[scale]'",
                              rule="backend_missing") from None
    plan_path = str(Path(plan_path).resolve())
    pf = PlanFile.load(plan_path)
    todo = set(StagedArtifact.open(pf.staging).missing())
    objects = [o for o in pf.objects if o["id"] in todo]
    cluster = None
    if scheduler is None:
        cluster = LocalCluster(n_workers=workers or 2, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        with Client(cluster if cluster is not None else scheduler) as client:
            n_workers = max(1, len(client.scheduler_info().get("workers", {})))
            n = max(1, min(len(objects), n_workers * SHARES_PER_WORKER))
            shares = [ids for k in range(1, n + 1) if (ids := shard_of(objects, k, n))] if objects else []
            futures = client.map(encode_share, [plan_path] * len(shares), shares, pure=False)
            results = client.gather(futures)
    finally:
        if cluster is not None:
            cluster.close()
    failed = [r for r in results if "error" in r]
    if failed:
        first = failed[0]
        raise ConversionError(f"{len(failed)} of {len(results)} Dask tasks failed; first: {first['error']}",
                              file=first.get("file"), rule=first.get("rule") or "encode_failed")
    return {"written": sum(len(r["written"]) for r in results), "bytes": sum(r["bytes"] for r in results),
            "tasks": len(results), "workers": n_workers}
