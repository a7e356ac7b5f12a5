"""Tessel from Python: a client of a Tessel server (submit, watch, cancel, jobs, best) and the
deploy-time runtime (tessel.runtime: load and launch tuned kernels through libtessel_runtime).

    from tessel import Client
    client = Client("127.0.0.1:7070")
    job = client.submit(["matmul(M=1024, N=1024, K=1024)"], target="cuda", trials=256)
    for info in client.watch(job):
        print(info.trials_done, "/", info.trials_budget)
    best = client.best("matmul(M=1024, N=1024, K=1024)", target="cuda")

    from tessel import runtime
    kernel = runtime.Database("kernels.pack").find("matmul(M=1024, N=1024, K=1024)", "cuda")
    kernel.launch(a, b, c)  # torch tensors (or numpy arrays, or (pointer, dtype, shape))

The client needs Debian's python3-grpcio and python3-protobuf; the runtime needs only
libtessel_runtime.
"""

from tessel.errors import Error

__all__ = ["Client", "Error", "runtime"]


def __getattr__(name):
    # The client imports gRPC only when asked for, so that tessel.runtime works without it.
    if name == "Client":
        from tessel.client import Client

        return Client
    if name == "runtime":
        import importlib

        return importlib.import_module("tessel.runtime")
    raise AttributeError(name)
