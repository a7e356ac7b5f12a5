"""A client of a Tessel server's client API (service Tessel of proto/tessel.proto)."""

import grpc

from tessel.errors import Error
from tessel._proto import tessel_pb2, tessel_pb2_grpc

_FINISHED = {
    tessel_pb2.JOB_STATE_DONE,
    tessel_pb2.JOB_STATE_CANCELLED,
    tessel_pb2.JOB_STATE_FAILED,
}


def _call(fn, request, **kwargs):
    try:
        return fn(request, **kwargs)
    except grpc.RpcError as e:
        raise Error(e.code().name, e.details()) from None


class Client:
    """A connection to `tessel serve` at `address` ("HOST:PORT").

    token: a client token (tessel token create), sent as `authorization: Bearer TOKEN`; default
    $TESSEL_TOKEN. tls_ca: a PEM file of the CA that signed the server's certificate (TLS);
    without it the channel is plain TCP, as `tessel serve` without --tls-cert serves.
    timeout_s bounds every call except watch.
    """

    def __init__(self, address, token=None, tls_ca=None, timeout_s=30.0):
        import os

        self.address = address
        self.timeout_s = timeout_s
        token = token if token is not None else os.environ.get("TESSEL_TOKEN", "")
        self._metadata = [("authorization", "Bearer " + token)] if token else []
        if tls_ca:
            with open(tls_ca, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(address, credentials)
        else:
            self._channel = grpc.insecure_channel(address)
        self._stub = tessel_pb2_grpc.TesselStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _kw(self, timeout=True):
        kw = {"metadata": self._metadata}
        if timeout:
            kw["timeout"] = self.timeout_s
        return kw

    def submit(self, workloads, target="cuda", arch="", trials=64, trials_per_task=0,
               time_budget_s=0.0, strategy="", priority=0, name="", seed=0, baselines=None,
               baseline_label="PyTorch eager"):
        """Submits a job tuning `workloads` (specs or definitions) and returns its id. `trials`
        is one budget shared by all tasks (tessel submit --trials). `baselines` maps some of the
        workloads to their latency elsewhere in ms (drawn on their tuning curves; tessel submit
        --baseline), all labelled `baseline_label`."""
        if isinstance(workloads, str):
            workloads = [workloads]
        baselines = [tessel_pb2.Baseline(workload=w, ms=ms, label=baseline_label)
                     for w, ms in (baselines or {}).items()]
        request = tessel_pb2.SubmitJobRequest(
            workloads=list(workloads),
            target=tessel_pb2.TargetSpec(kind=target, arch=arch),
            trials_per_task=trials_per_task,
            total_trials=trials,
            time_budget_s=time_budget_s,
            strategy=strategy,
            priority=priority,
            name=name,
            seed=seed,
            baselines=baselines,
        )
        return _call(self._stub.SubmitJob, request, **self._kw()).job_id

    def job(self, job_id):
        """The job's JobInfo (state, tasks with trials and best latency)."""
        return _call(self._stub.GetJob, tessel_pb2.GetJobRequest(job_id=job_id), **self._kw())

    def jobs(self, unfinished_only=False):
        """Every job the caller may see, newest first."""
        request = tessel_pb2.ListJobsRequest(unfinished_only=unfinished_only)
        return list(_call(self._stub.ListJobs, request, **self._kw()).jobs)

    def watch(self, job_id):
        """An iterator of the job's JobInfo as it progresses; it ends once the job is done,
        cancelled or failed."""
        stream = _call(self._stub.WatchJob, tessel_pb2.WatchJobRequest(job_id=job_id),
                       **self._kw(timeout=False))
        try:
            for info in stream:
                yield info
                if info.state in _FINISHED:
                    return
        except grpc.RpcError as e:
            raise Error(e.code().name, e.details()) from None
        finally:
            stream.cancel()

    def cancel(self, job_id):
        """Stops dispatching the job's candidates; what was measured stays. Its JobInfo."""
        return _call(self._stub.CancelJob, tessel_pb2.CancelJobRequest(job_id=job_id),
                     **self._kw())

    def best(self, workload, target="cuda", arch="", device_name=""):
        """The kernel to deploy for `workload` on the target: the fastest ok record measured on
        `device_name` when given and it has one, else the fastest of the target (a BestRecord:
        `match` says which; its source and, for a record that keeps it, the artifact: the source
        as measured, the cubin, the toolchain)."""
        request = tessel_pb2.QueryBestRequest(
            workload=workload, target=tessel_pb2.TargetSpec(kind=target, arch=arch),
            device_name=device_name)
        return _call(self._stub.QueryBest, request, **self._kw())
