"""tessel.Client against a real `tessel serve` on port 0 with a host worker: submit, watch to the
end, jobs, best (with the stored artifact), cancel, and the server's errors."""

import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import tessel
from tessel import Client, Error

TESSEL = os.environ.get("TESSEL_BINARY", "tessel")
SPEC = "matmul(M=16, N=16, K=16)"


class ServiceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tessel_py_")
        cls.server_log = open(os.path.join(cls.dir, "serve.log"), "w+")
        cls.server = subprocess.Popen(
            [TESSEL, "serve", "--db", os.path.join(cls.dir, "log.db"), "--listen", "127.0.0.1:0",
             "--max-repeats", "5", "--min-total-ms", "1"],
            stdout=cls.server_log, stderr=subprocess.STDOUT)
        cls.address = None
        deadline = time.time() + 20
        while time.time() < deadline and cls.address is None:
            with open(cls.server_log.name) as f:
                m = re.search(r"listening on (127\.0\.0\.1:[0-9]+)", f.read())
            if m:
                cls.address = m.group(1)
            else:
                time.sleep(0.05)
        assert cls.address, open(cls.server_log.name).read()
        cls.worker = subprocess.Popen(
            [TESSEL, "worker", "--server", cls.address, "--target", "host", "--worker-id",
             "py-worker", "--heartbeat-s", "0.5", "--cache", os.path.join(cls.dir, "cache")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.client = Client(cls.address)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        for p in (cls.worker, cls.server):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        cls.server_log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_submit_watch_best(self):
        job = self.client.submit([SPEC], target="host", trials=4, name="python",
                                 baselines={SPEC: 0.5}, baseline_label="cuBLAS")
        self.assertGreater(job, 0)
        seen = list(self.client.watch(job))
        self.assertTrue(seen)
        done = [info.trials_done for info in seen]
        self.assertEqual(done, sorted(done))  # progress only grows
        last = seen[-1]
        self.assertEqual(last.state, tessel.client.tessel_pb2.JOB_STATE_DONE, last)
        self.assertEqual(last.trials_done, 4)
        self.assertEqual(last.name, "python")
        self.assertEqual(last.tasks[0].baseline_ms, 0.5)
        self.assertEqual(last.tasks[0].baseline_label, "cuBLAS")
        self.assertIn(job, [j.job_id for j in self.client.jobs()])
        self.assertEqual(self.client.job(job).state, tessel.client.tessel_pb2.JOB_STATE_DONE)

        best = self.client.best(SPEC, target="host")
        self.assertEqual(best.job_id, job)
        self.assertGreater(best.median_ms, 0)
        self.assertTrue(best.HasField("artifact"))
        self.assertFalse(best.regenerated)
        self.assertEqual(best.artifact.source.code, best.source.code)
        self.assertIn('extern "C"', best.source.code)
        self.assertGreater(best.artifact.codegen_version, 0)
        self.assertTrue(best.match.startswith("same architecture (host), measured on "),
                        best.match)
        measured_on = best.device_name
        here = self.client.best(SPEC, target="host", device_name=measured_on)
        self.assertEqual(here.match, f"same device ({measured_on})")

    def test_errors_name_the_problem(self):
        with self.assertRaises(Error) as e:
            self.client.best("matmul(M=3, N=3, K=3)", target="host")
        self.assertEqual(e.exception.code, "NOT_FOUND")
        self.assertTrue(e.exception.message.startswith("no measured kernel for matmul(M=3, N=3"),
                        e.exception.message)
        with self.assertRaises(Error) as e:
            self.client.cancel(987654)
        self.assertEqual(e.exception.code, "NOT_FOUND")
        self.assertIn("987654", e.exception.message)
        with self.assertRaises(Error) as e:
            self.client.submit(["matmul(M=0, N=4, K=4)"], target="host", trials=4)
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(Error) as e:
            self.client.submit([SPEC], target="host", trials=4, baselines={SPEC: -1.0})
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertIn("has latency -1 ms: a baseline is a positive number of milliseconds",
                      e.exception.message)

    def test_an_absent_server(self):
        with Client("127.0.0.1:1", timeout_s=2) as c:
            with self.assertRaises(Error) as e:
                c.jobs()
            self.assertEqual(e.exception.code, "UNAVAILABLE")


if __name__ == "__main__":
    unittest.main()
