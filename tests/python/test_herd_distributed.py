#!/usr/bin/python3
"""torch.distributed's backend="herd" end to end, with real processes: every operation against
its closed form, outside a herd job (torch's store: file://, tcp://) and inside one (`herd local
--`, env://); DistributedDataParallel and its features against the same script over gloo; a
dead or stopped rank and desynchronised ranks, named.

Run one case: HERD_BINARY=build/bin/herd /usr/bin/python3 -m unittest test_herd_distributed.X.y
(ctest registers every case; tests/python/CMakeLists.txt).
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
HERD = os.environ.get("HERD_BINARY", os.path.join(ROOT, "build", "bin", "herd"))
PYTHON = "/usr/bin/python3"
PACKAGE = os.path.normpath(os.path.join(os.path.dirname(HERD), "..", "python"))
EXAMPLES = os.path.join(ROOT, "examples", "python")


def load_json(path):
    with open(path) as f:
        return json.load(f)


def env(**extra):
    e = dict(os.environ)
    e["PYTHONPATH"] = PACKAGE + (":" + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("OMP_NUM_THREADS", "1")
    for k in ("HERD_SCHEDULER", "HERD_JOB"):  # outside a herd job unless the test says so
        e.pop(k, None)
    e.update({k: str(v) for k, v in extra.items()})
    return e


class Case(unittest.TestCase):
    def tmp(self):
        d = tempfile.mkdtemp(prefix="herd-c10d-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        return d

    def ranks(self, script, world, args=(), timeout=180, extra_env=None, init=None):
        """`world` processes of `script` outside any herd job, through torch's store (a file
        store by default). Returns [(rc, out, err)] by rank."""
        d = self.tmp()
        init = init or f"file://{d}/store"
        procs = []
        for r in range(world):
            procs.append(subprocess.Popen(
                [PYTHON, script, "--init-method", init, "--rank", str(r),
                 "--world-size", str(world), *args],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=env(**(extra_env or {}))))
        return procs

    def wait_all(self, procs, timeout=180):
        out = []
        for p in procs:
            try:
                o, e = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                o, e = p.communicate()
                o += "\n(killed: timeout)"
            out.append((p.returncode, o, e))
        return out

    def herd_local(self, workers, cmd, local_args=(), timeout=240):
        p = subprocess.run([HERD, "local", "--workers", str(workers), *local_args, "--", *cmd],
                           capture_output=True, text=True, timeout=timeout, env=env())
        return p


class OperationsTest(Case):
    def test_every_operation_outside_a_job(self):
        """Three ranks over torch's file store, as a gloo job starts: every operation, every
        dtype, checked against its closed form."""
        results = self.wait_all(self.ranks(os.path.join(HERE, "c10d_ops.py"), 3))
        for r, (rc, out, err) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {r}:\n{out}\n{err}")
            self.assertIn(f"rank {r}:", out)
            self.assertIn("checks passed", out)

    def test_tcp_init_method(self):
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        results = self.wait_all(self.ranks(os.path.join(HERE, "c10d_ops.py"), 2,
                                           args=["--size", "5"],
                                           init=f"tcp://127.0.0.1:{port}"))
        for r, (rc, out, err) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {r}:\n{out}\n{err}")

    def test_every_operation_in_a_herd_job(self):
        """Under `herd local --` (env:// from the variables it sets): the default group joins
        the job (its store at the scheduler), and the job completes when the scripts end."""
        p = self.herd_local(3, [PYTHON, os.path.join(HERE, "c10d_ops.py"), "--size", "9"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("3 worker(s)", p.stdout)  # the summary of a job that completed


class DdpTest(Case):
    def ddp(self, backend, extra=(), workers=2):
        out = self.tmp()
        p = self.herd_local(workers, [PYTHON, os.path.join(EXAMPLES, "ddp_train.py"),
                                      "--backend", backend, "--train-samples", "6000",
                                      "--max-iterations", "40", "--out", out, *extra])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        ranks = []
        for r in range(workers):
            with open(os.path.join(out, f"rank-{r}.json")) as f:
                ranks.append(json.load(f))
        # The parameters (batch norm's running statistics are each rank's own after the last
        # forward: DDP broadcasts them from rank 0 at the start of each).
        params = [{k: v for k, v in torch.load(os.path.join(out, f"rank-{r}.pt")).items()
                   if "running_" not in k and "num_batches" not in k} for r in range(workers)]
        return p, ranks, params

    def test_unmodified_ddp_script_trains_as_over_gloo(self):
        """ddp_train.py (AdamW with a no-decay group, OneCycle, clip_grad_norm_,
        DistributedSampler) under `herd local`, once with backend="herd" and once with gloo
        (herd local as its launcher only): identical replicas, the same model."""
        herd_run, herd_ranks, herd_params = self.ddp("herd")
        gloo_run, gloo_ranks, gloo_params = self.ddp("gloo")
        self.assertIn("without joining the job", gloo_run.stdout)  # gloo: a launcher only
        for params in (herd_params, gloo_params):
            for name, t in params[0].items():
                self.assertTrue(torch.equal(t, params[1][name]), f"{name}: replicas differ")
        for name, t in herd_params[0].items():
            self.assertTrue(torch.allclose(t, gloo_params[0][name], atol=2e-3, rtol=1e-3),
                            f"{name}: herd and gloo differ by {(t - gloo_params[0][name]).abs().max()}")
        self.assertEqual(herd_ranks[0]["iterations"], 40)
        self.assertAlmostEqual(herd_ranks[0]["accuracy"], gloo_ranks[0]["accuracy"], delta=0.02)

    def test_ddp_features_as_over_gloo(self):
        """find_unused_parameters with no_sync(), a communication hook (fp16), static_graph and
        join() over uneven inputs give what they give over gloo."""
        got = {}
        for backend in ("herd", "gloo"):
            out = self.tmp()
            p = self.herd_local(2, [PYTHON, os.path.join(HERE, "c10d_ddp_features.py"),
                                    "--backend", backend, "--out", out])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            got[backend] = [torch.load(os.path.join(out, f"rank-{r}.pt")) for r in range(2)]
        for case in got["herd"][0]:
            for r in range(2):
                for a, b in zip(got["herd"][r][case], got["gloo"][r][case]):
                    tol = 5e-3 if case == "fp16_hook" else 1e-5
                    self.assertTrue(torch.allclose(a, b, atol=tol), f"{case}, rank {r}: "
                                    f"herd and gloo differ by {(a - b).abs().max()}")
            # Replicas agree where they do over gloo (DDP leaves a parameter unused in the
            # synchronised pass but used under no_sync() with each rank's own gradient).
            for a, b, ga, gb in zip(got["herd"][0][case], got["herd"][1][case],
                                    got["gloo"][0][case], got["gloo"][1][case]):
                if torch.equal(ga, gb):
                    self.assertTrue(torch.equal(a, b), f"{case}: replicas differ")


class FailureTest(Case):
    def failures(self, scenario, world=3, extra_env=None, stop_pid=False):
        d = self.tmp()
        procs = self.ranks(os.path.join(HERE, "c10d_failures.py"), world,
                           args=["--scenario", scenario, "--out", d], extra_env=extra_env)
        results = self.wait_all(procs, timeout=120)
        if stop_pid:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        got = {}
        for r in range(world):
            path = os.path.join(d, f"rank-{r}.json")
            self.assertTrue(os.path.exists(path), f"rank {r} wrote nothing: {results[r]}")
            got[r] = load_json(path)
        return got, results

    def test_desynchronised_shapes_are_named(self):
        got, _ = self.failures("desync-shape", world=2)
        for r in range(2):
            err = got[r]["error"] or ""
            self.assertIn("rank 0 called allreduce(sum) on float32[10, 4]", err)
            self.assertIn("rank 1 called allreduce(sum) on float32[12, 4]", err)

    def test_desynchronised_operations_are_named(self):
        got, _ = self.failures("desync-op", world=3)
        for r in range(3):
            err = got[r]["error"] or ""
            self.assertIn("rank 1 called broadcast(root 0) on float32[10]", err)
            self.assertIn("rank 2 called allreduce(sum) on float32[10]", err)

    def test_a_dead_rank_is_named_by_every_survivor(self):
        got, _ = self.failures("die", extra_env={"HERD_HEARTBEAT_TIMEOUT_S": "3"})
        left = got[2]["left_at"]
        for r in (0, 1):
            self.assertIn("rank 2", got[r]["error"] or "", got[r])
            self.assertLess(got[r]["raised_at"] - left, 3 + 2, got[r])

    def test_a_stopped_rank_is_named_within_the_heartbeat_timeout(self):
        """SIGSTOP: the process lives (its sockets stay open) but never answers; the heartbeat
        through torch's store names it."""
        d = self.tmp()
        procs = self.ranks(os.path.join(HERE, "c10d_failures.py"), 3,
                           args=["--scenario", "stop", "--out", d],
                           extra_env={"HERD_HEARTBEAT_TIMEOUT_S": "3"})
        try:
            for r in (0, 1):
                procs[r].communicate(timeout=90)
        finally:
            procs[2].send_signal(signal.SIGCONT)
            procs[2].kill()
            procs[2].communicate()
        left = load_json(os.path.join(d, "rank-2.json"))["left_at"]
        for r in (0, 1):
            got = load_json(os.path.join(d, f"rank-{r}.json"))
            self.assertIn("rank 2", got["error"] or "", got)
            self.assertLess(got["raised_at"] - left, 3 + 2, got)

    def test_a_dead_rank_in_a_herd_job_is_named(self):
        """Under `herd local`: the survivors raise naming the dead worker, and herd local reports
        the job failed because of it."""
        d = self.tmp()
        p = self.herd_local(3, [PYTHON, os.path.join(HERE, "c10d_failures.py"), "--scenario",
                                "die", "--out", d])
        self.assertNotEqual(p.returncode, 0)
        left = load_json(os.path.join(d, "rank-2.json"))["left_at"]
        for r in (0, 1):
            got = load_json(os.path.join(d, f"rank-{r}.json"))
            self.assertIn("rank 2", got["error"] or "", got)
            self.assertLess(got["raised_at"] - left, 10 + 2, got)  # herd local: 10 s heartbeat


if __name__ == "__main__":
    unittest.main()
