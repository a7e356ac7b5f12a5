"""libtessel_runtime through ctypes: open a tuning log or kernel pack, find the best kernel of a
workload on this machine's device, launch it on your tensors.

    from tessel import runtime
    db = runtime.Database("kernels.pack")
    kernel = db.find("matmul(M=256, N=256, K=256)", "host")   # or "cuda"
    kernel.launch(a, b, c)                                      # inputs, then outputs

A tensor is a torch tensor (contiguous; a CUDA tensor for "cuda", whose launch goes on the
current stream unless `stream` is given), a numpy array (C-contiguous), or a tuple
(address, dtype, shape). Dtypes and shapes are checked against the workload (the runtime refuses
a mismatch, naming the tensor). Errors raise tessel.Error with the runtime's status and message.

The library is $TESSEL_RUNTIME_LIBRARY when set, else the one of the build this package comes
from, else libtessel_runtime.so on the loader's path.
"""

import ctypes
import ctypes.util
import os
import threading

from tessel.errors import Error

TARGETS = {"host": 0, "cuda": 1}
MATCHES = {0: "device", 1: "architecture"}

_STATUS_NAMES = [
    "TESSEL_OK",
    "TESSEL_ERROR_INVALID_ARGUMENT",
    "TESSEL_ERROR_NOT_FOUND",
    "TESSEL_ERROR_BAD_FILE",
    "TESSEL_ERROR_UNSUPPORTED",
    "TESSEL_ERROR_COMPILE",
    "TESSEL_ERROR_LAUNCH",
    "TESSEL_ERROR_INTERNAL",
]


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_char_p),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
    ]


class _OpenOptions(ctypes.Structure):
    _fields_ = [("cache_dir", ctypes.c_char_p), ("cuda_device", ctypes.c_int)]


_lib = None
_lib_lock = threading.Lock()


def _library_path():
    path = os.environ.get("TESSEL_RUNTIME_LIBRARY")
    if path:
        return path
    try:
        from tessel import _build_config

        if os.path.exists(_build_config.RUNTIME_LIBRARY):
            return _build_config.RUNTIME_LIBRARY
    except ImportError:
        pass
    return ctypes.util.find_library("tessel_runtime") or "libtessel_runtime.so"


def _library():
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        lib = ctypes.CDLL(_library_path())
        c_int, c_char_p, c_void_p = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p
        size_p = ctypes.POINTER(ctypes.c_size_t)
        signatures = {
            "tessel_last_error": ([], c_char_p),
            "tessel_open": ([c_char_p, ctypes.POINTER(_OpenOptions), ctypes.POINTER(c_void_p)],
                            c_int),
            "tessel_close": ([c_void_p], None),
            "tessel_find": ([c_void_p, c_char_p, c_int, ctypes.POINTER(c_void_p)], c_int),
            "tessel_kernel_release": ([c_void_p], None),
            "tessel_launch": ([c_void_p, ctypes.POINTER(_Tensor), c_int, c_void_p], c_int),
            "tessel_kernel_match": ([c_void_p], c_int),
            "tessel_kernel_match_description": ([c_void_p], c_char_p),
            "tessel_kernel_workload_key": ([c_void_p], c_char_p),
            "tessel_kernel_record_uid": ([c_void_p], c_char_p),
            "tessel_kernel_measured_on": ([c_void_p], c_char_p),
            "tessel_kernel_median_ms": ([c_void_p], ctypes.c_double),
            "tessel_kernel_codegen_version": ([c_void_p], c_int),
            "tessel_kernel_regenerated": ([c_void_p], c_int),
            "tessel_kernel_compiled_here": ([c_void_p], c_int),
            "tessel_kernel_source": ([c_void_p, size_p], ctypes.POINTER(ctypes.c_char)),
            "tessel_kernel_binary": ([c_void_p, size_p], c_void_p),
            "tessel_kernel_num_args": ([c_void_p], c_int),
            "tessel_kernel_arg": ([c_void_p, c_int, ctypes.POINTER(c_char_p),
                                   ctypes.POINTER(c_char_p), ctypes.POINTER(c_int),
                                   ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)),
                                   ctypes.POINTER(c_int)], c_int),
        }
        for name, (args, result) in signatures.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = result
        _lib = lib
        return lib


def _check(status):
    if status != 0:
        name = _STATUS_NAMES[status] if 0 <= status < len(_STATUS_NAMES) else str(status)
        raise Error(name, _library().tessel_last_error().decode())


_TORCH_DTYPES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
    "int32": "i32", "int64": "i64", "bool": "bool",
}
_NUMPY_DTYPES = {"<f4": "f32", "<f2": "f16", "<f8": "f64", "<i4": "i32", "<i8": "i64",
                 "|b1": "bool"}


def _describe(t, target):
    """(address, dtype, shape) of one launch argument."""
    if isinstance(t, tuple) and len(t) == 3:
        return int(t[0]), str(t[1]), tuple(int(d) for d in t[2])
    if hasattr(t, "data_ptr") and hasattr(t, "dtype"):  # torch
        dtype = _TORCH_DTYPES.get(str(t.dtype).replace("torch.", ""))
        if dtype is None:
            raise Error("TESSEL_ERROR_INVALID_ARGUMENT", f"unsupported torch dtype {t.dtype}")
        if not t.is_contiguous():
            raise Error("TESSEL_ERROR_INVALID_ARGUMENT",
                        "a tensor is not contiguous; pass tensor.contiguous()")
        on_cuda = t.device.type == "cuda"
        if on_cuda != (target == "cuda"):
            raise Error("TESSEL_ERROR_INVALID_ARGUMENT",
                        f"a tensor is on {t.device}, and the kernel runs on the {target} target")
        return t.data_ptr(), dtype, tuple(t.shape)
    if hasattr(t, "__array_interface__"):  # numpy
        ai = t.__array_interface__
        if ai.get("strides") is not None:
            raise Error("TESSEL_ERROR_INVALID_ARGUMENT",
                        "an array is not C-contiguous; pass numpy.ascontiguousarray(a)")
        dtype = _NUMPY_DTYPES.get(ai["typestr"])
        if dtype is None:
            raise Error("TESSEL_ERROR_INVALID_ARGUMENT", f"unsupported dtype {ai['typestr']}")
        return ai["data"][0], dtype, tuple(ai["shape"])
    raise Error("TESSEL_ERROR_INVALID_ARGUMENT",
                f"cannot launch on a {type(t).__name__}: pass a torch tensor, a numpy array or "
                "(address, dtype, shape)")


class Kernel:
    """A found and loaded kernel (tessel_kernel)."""

    def __init__(self, handle, target):
        self._handle = ctypes.c_void_p(handle)
        self.target = target
        lib = _library()
        h = self._handle
        self.match = MATCHES[lib.tessel_kernel_match(h)]
        self.match_description = lib.tessel_kernel_match_description(h).decode()
        self.workload_key = lib.tessel_kernel_workload_key(h).decode()
        self.record_uid = lib.tessel_kernel_record_uid(h).decode()
        self.measured_on = lib.tessel_kernel_measured_on(h).decode()
        self.median_ms = lib.tessel_kernel_median_ms(h)
        self.codegen_version = lib.tessel_kernel_codegen_version(h)
        self.regenerated = bool(lib.tessel_kernel_regenerated(h))
        self.compiled_here = bool(lib.tessel_kernel_compiled_here(h))
        size = ctypes.c_size_t()
        text = lib.tessel_kernel_source(h, ctypes.byref(size))
        self.source = ctypes.string_at(text, size.value).decode()
        data = lib.tessel_kernel_binary(h, ctypes.byref(size))
        self.binary = ctypes.string_at(data, size.value) if size.value else b""
        self.args = []
        for i in range(lib.tessel_kernel_num_args(h)):
            name, dtype = ctypes.c_char_p(), ctypes.c_char_p()
            ndim, is_output = ctypes.c_int(), ctypes.c_int()
            shape = ctypes.POINTER(ctypes.c_int64)()
            _check(lib.tessel_kernel_arg(h, i, ctypes.byref(name), ctypes.byref(dtype),
                                         ctypes.byref(ndim), ctypes.byref(shape),
                                         ctypes.byref(is_output)))
            self.args.append({"name": name.value.decode(), "dtype": dtype.value.decode(),
                              "shape": tuple(shape[d] for d in range(ndim.value)),
                              "output": bool(is_output.value)})

    def launch(self, *tensors, stream=None):
        """Runs the kernel on `tensors` (inputs, then outputs). CUDA: on `stream` (a CUstream as
        an int), else torch's current stream when the tensors are torch's, else the default."""
        described = [_describe(t, self.target) for t in tensors]
        shapes = [(ctypes.c_int64 * max(1, len(s)))(*s) for _, _, s in described]
        dtypes = [d.encode() for _, d, _ in described]
        args = (_Tensor * max(1, len(described)))()
        for i, (address, _, shape) in enumerate(described):
            args[i] = _Tensor(address, dtypes[i], len(shape), shapes[i])
        if stream is None and self.target == "cuda" and tensors and hasattr(tensors[0], "data_ptr"):
            import torch

            stream = torch.cuda.current_stream(tensors[0].device).cuda_stream
        _check(_library().tessel_launch(self._handle, args, len(described),
                                        ctypes.c_void_p(stream) if stream else None))

    def __del__(self):
        if _lib is not None and self._handle:
            _lib.tessel_kernel_release(self._handle)
            self._handle = ctypes.c_void_p()


class Database:
    """An open tuning log or kernel pack (tessel_db), read-only."""

    def __init__(self, path, cache_dir=None, cuda_device=0):
        lib = _library()
        options = _OpenOptions(cache_dir.encode() if cache_dir else None, cuda_device)
        handle = ctypes.c_void_p()
        _check(lib.tessel_open(os.fspath(path).encode(), ctypes.byref(options),
                               ctypes.byref(handle)))
        self._handle = handle

    def find(self, workload, target="cuda"):
        """The kernel of `workload` (a spec, a definition or a workload key) for `target`
        ("host" or "cuda") on this machine's device, loaded."""
        if target not in TARGETS:
            raise Error("TESSEL_ERROR_INVALID_ARGUMENT",
                        f"unknown target '{target}'; use host or cuda")
        handle = ctypes.c_void_p()
        _check(_library().tessel_find(self._handle, workload.encode(), TARGETS[target],
                                      ctypes.byref(handle)))
        return Kernel(handle.value, target)

    def close(self):
        if self._handle:
            _library().tessel_close(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if _lib is not None and getattr(self, "_handle", None):
            self.close()
