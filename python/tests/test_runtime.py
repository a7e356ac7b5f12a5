"""tessel.runtime (ctypes over libtessel_runtime) on the host: a kernel tuned with `tessel tune`
and packed with `tessel pack`, launched on this test's own buffers, and the runtime's errors."""

import ctypes
import os
import random
import shutil
import subprocess
import tempfile
import unittest

from tessel import Error, runtime

TESSEL = os.environ.get("TESSEL_BINARY", "tessel")
M, N, K = 8, 12, 16
SPEC = f"matmul(M={M}, N={N}, K={K})"


def floats(values):
    return (ctypes.c_float * len(values))(*values)


class RuntimeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tessel_py_rt_")
        cls.log = os.path.join(cls.dir, "tuning.db")
        cls.pack = os.path.join(cls.dir, "kernels.pack")
        cls.cache = os.path.join(cls.dir, "cache")
        subprocess.run([TESSEL, "tune", "-w", SPEC, "-n", "3", "--target", "host", "--quiet",
                        "--db", cls.log], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([TESSEL, "pack", "--db", cls.log, "-w", SPEC, "--out", cls.pack],
                       check=True, stdout=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def launch_and_check(self, kernel):
        rng = random.Random(3)
        a = floats([rng.uniform(-1, 1) for _ in range(M * K)])
        b = floats([rng.uniform(-1, 1) for _ in range(K * N)])
        c = floats([float("nan")] * (M * N))
        kernel.launch((ctypes.addressof(a), "f32", (M, K)), (ctypes.addressof(b), "f32", (K, N)),
                      (ctypes.addressof(c), "f32", (M, N)))
        for i in range(M):
            for j in range(N):
                want = sum(a[i * K + k] * b[k * N + j] for k in range(K))
                self.assertAlmostEqual(c[i * N + j], want, places=4)

    def test_log_and_pack(self):
        for path in (self.log, self.pack):
            with runtime.Database(path, cache_dir=self.cache) as db:
                kernel = db.find(SPEC, "host")
                self.assertEqual(kernel.match, "device")
                self.assertTrue(kernel.match_description.startswith("same device ("))
                self.assertFalse(kernel.regenerated)
                self.assertIn('extern "C"', kernel.source)
                self.assertEqual(kernel.binary, b"")
                self.assertEqual([a["name"] for a in kernel.args], ["A", "B", "C"])
                self.assertEqual(kernel.args[2], {"name": "C", "dtype": "f32", "shape": (M, N),
                                                  "output": True})
                self.launch_and_check(kernel)

    def test_errors(self):
        db = runtime.Database(self.log, cache_dir=self.cache)
        kernel = db.find(SPEC, "host")
        buf = floats([0.0] * (K * K))
        with self.assertRaises(Error) as e:
            kernel.launch((ctypes.addressof(buf), "f32", (M, K)),
                          (ctypes.addressof(buf), "f32", (K, K)),
                          (ctypes.addressof(buf), "f32", (M, N)))
        self.assertEqual(e.exception.code, "TESSEL_ERROR_INVALID_ARGUMENT")
        self.assertEqual(e.exception.message, f"tensor 1 (B): shape [{K}, {K}], expected [{K}, {N}]")
        with self.assertRaises(Error) as e:
            kernel.launch([1, 2, 3])
        self.assertEqual(e.exception.message,
                         "cannot launch on a list: pass a torch tensor, a numpy array or "
                         "(address, dtype, shape)")
        with self.assertRaises(Error) as e:
            db.find("nothing(x=1)", "host")
        self.assertEqual(e.exception.code, "TESSEL_ERROR_NOT_FOUND")
        self.assertTrue(e.exception.message.startswith("unknown workload 'nothing(x=1)'"))
        with self.assertRaises(Error) as e:
            db.find(SPEC, "tpu")
        self.assertEqual(e.exception.message, "unknown target 'tpu'; use host or cuda")
        missing = os.path.join(self.dir, "none.db")
        with self.assertRaises(Error) as e:
            runtime.Database(missing)
        self.assertEqual(e.exception.code, "TESSEL_ERROR_NOT_FOUND")
        self.assertEqual(e.exception.message,
                         f"tuning log {missing} does not exist; check the path (a read-only open "
                         "never creates a log)")
        corrupt = os.path.join(self.dir, "corrupt.db")
        with open(corrupt, "wb") as f:
            f.write(b"x" * 8192)
        with self.assertRaises(Error) as e:
            runtime.Database(corrupt)
        self.assertEqual(e.exception.code, "TESSEL_ERROR_BAD_FILE")
        self.assertIn("is not a Tessel tuning log (not an SQLite database)", e.exception.message)


if __name__ == "__main__":
    unittest.main()
