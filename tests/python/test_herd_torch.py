#!/usr/bin/python3
"""The Python front end (herd.torch) end to end: real `herd local` runs of a user's script
(train_tiny.py) with /usr/bin/python3 as every worker, a real scheduler, shards and UCX.

Run one case: HERD_BINARY=build/bin/herd /usr/bin/python3 -m unittest test_herd_torch.Case.test_x
(ctest registers every case; tests/python/CMakeLists.txt).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
HERD = os.environ.get("HERD_BINARY", os.path.join(HERE, "..", "..", "build", "bin", "herd"))
PYTHON = "/usr/bin/python3"
SYNCHRONOUS = ["allreduce", "lp", "dear", "ps_sync", "ps_ec", "sparse", "topk_allgather", "clps"]


def summary(out):
    for line in out.splitlines():
        if line.startswith('{"job":'):
            return json.loads(line)
    return None


class Run:
    def __init__(self, rc, out, err, dir):
        self.rc, self.out, self.err, self.dir = rc, out, err, dir
        self.summary = summary(out)

    def rank(self, r):
        with open(os.path.join(self.dir, f"rank-{r}.json")) as f:
            return json.load(f)

    def params(self, r):
        return torch.load(os.path.join(self.dir, f"rank-{r}.pt"))


class HerdTorchTest(unittest.TestCase):
    def herd_local(self, mode, script_args=(), workers=2, local_args=(), script=None,
                   timeout=180):
        out_dir = tempfile.mkdtemp(prefix="herd-py-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", out_dir]))
        cmd = [HERD, "local", "--workers", str(workers), "--mode", mode, "--json",
               *local_args, "--", PYTHON, script or os.path.join(HERE, "train_tiny.py"),
               "--out", out_dir, *script_args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return Run(p.returncode, p.stdout, p.stderr, out_dir)

    def assertTrained(self, run, workers=2, identical=True, iterations=20, rate=True):
        self.assertEqual(run.rc, 0, run.out + run.err)
        self.assertIsNotNone(run.summary, run.out)
        self.assertEqual(run.summary["iterations"], iterations)
        if rate:  # samples counted from the model's inputs
            self.assertGreater(run.summary["samples_per_second"], 0, run.summary)
        m = run.summary["metrics"]
        self.assertLess(m["loss"], m["first_loss"], run.summary)  # it learnt
        self.assertEqual(m["rank_sum"], sum(range(workers)))  # herd.allreduce of the ranks
        if identical:
            first = run.params(0)
            for r in range(1, workers):
                for a, b in zip(first, run.params(r)):
                    self.assertTrue(torch.equal(a, b), f"rank {r} differs from rank 0")


class ModesTest(HerdTorchTest):
    """Every mode trains the user's model; the synchronous modes' replicas end bitwise
    identical. allreduce, dear and ps_sync are in the default suite, the rest are `slow`."""

    def check_mode(self, mode, workers=2):
        extra = ["--servers", "1"] if mode.startswith("ps_") else []
        run = self.herd_local(mode, workers=workers, local_args=extra)
        self.assertTrained(run, workers=workers, identical=mode in SYNCHRONOUS)
        self.assertEqual(set(run.rank(0)["modes"]), {mode})


def _mode_test(mode):
    def test(self):
        self.check_mode(mode, workers=3 if mode in ("decentralized", "decentralized_lp") else 2)
    return test


for _mode in SYNCHRONOUS + ["ps_async", "decentralized", "decentralized_lp"]:
    setattr(ModesTest, f"test_{_mode}", _mode_test(_mode))


class FeaturesTest(HerdTorchTest):
    def test_unused_parameters_count_as_zero(self):
        run = self.herd_local("dear", ["--unused"])
        self.assertTrained(run)
        spare = run.params(0)[4:]  # spare.weight, spare.bias: a zero gradient, never moved
        # The package of the build tree next to the herd binary, as herd local finds it.
        sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERD), "..", "python")]
        import train_tiny
        torch.manual_seed(1)
        initial = list(train_tiny.Tiny(unused=True).parameters())
        self.assertEqual(len(spare), 2)
        for a, b in zip(spare, initial[4:]):
            self.assertTrue(torch.equal(a, b))
        self.assertFalse(torch.equal(run.params(0)[0], initial[0]))

    def test_gradient_accumulation(self):
        run = self.herd_local("allreduce", ["--accumulate", "2", "--iterations", "10"])
        self.assertTrained(run, iterations=10)
        self.assertEqual(run.rank(1)["iterations"], 10)

    def test_lr_scheduler_is_read_each_step(self):
        run = self.herd_local("allreduce", ["--scheduler", "--optimizer", "sgd"])
        self.assertTrained(run)
        self.assertEqual(run.rank(0)["lrs"][:6], [0.05] * 5 + [0.025])
        # The same job without the scheduler ends elsewhere: the halved rate was applied.
        plain = self.herd_local("allreduce", ["--optimizer", "sgd"])
        self.assertTrained(plain)
        self.assertFalse(torch.equal(run.params(0)[0], plain.params(0)[0]))

    def test_lr_scheduler_steps_the_shards(self):
        # ps_sync applies the update on the shards, at the learning rate each push carries: the
        # scheduled run ends where allreduce with the same schedule ends.
        ps = self.herd_local("ps_sync", ["--scheduler", "--optimizer", "sgd"],
                             local_args=["--servers", "1", "--optimizer", "sgd"])
        self.assertTrained(ps)
        ar = self.herd_local("allreduce", ["--scheduler", "--optimizer", "sgd"])
        self.assertTrained(ar)
        for a, b in zip(ps.params(0), ar.params(0)):
            self.assertTrue(torch.allclose(a, b, atol=1e-5), (a - b).abs().max())

    def test_refused_optimizer_setting(self):
        # Any torch optimizer steps where the workers apply the update (test_herd_optimizer.py);
        # the shards of ps_sync run the job's optimizer, and refuse what they cannot honour.
        run = self.herd_local("ps_sync", ["--optimizer", "nesterov"], workers=1,
                              local_args=["--servers", "1"])
        self.assertNotEqual(run.rc, 0)
        self.assertIn("the shards of ps_sync and ps_async cannot honour SGD(nesterov)", run.err)
        self.assertIn("train in a mode where the workers apply the update", run.err)

    def test_noncontiguous_parameter(self):
        run = self.herd_local("allreduce", ["--noncontiguous"], workers=1)
        self.assertNotEqual(run.rc, 0)
        self.assertIn("parameter 'fc1.weight' is not contiguous", run.err)

    def test_reassigned_parameter(self):
        run = self.herd_local("allreduce", ["--reassign-at", "3"], workers=1)
        self.assertNotEqual(run.rc, 0)
        self.assertIn("parameters were replaced", run.err)

    def test_exception_in_the_script_stops_the_job(self):
        run = self.herd_local("allreduce", ["--raise-at", "5", "--raise-rank", "1"])
        self.assertNotEqual(run.rc, 0)
        self.assertIn("the script failed on purpose at iteration 5", run.err)  # its last lines
        self.assertIn("worker-1", run.err)

    def test_refused_registration_raises_at_the_call_that_registers(self):
        """herd.init() only opens the session; the job refuses the worker (a rank that is no
        slot of it) at the first call that registers, herd.rank(), which raises herd.Error
        naming itself, the worker and the scheduler's reason."""
        run = self.herd_local("allreduce", ["--ask-rank", "5"], workers=1)
        self.assertNotEqual(run.rc, 0)
        self.assertIn("herd.init() returned", run.err)
        self.assertIn("herd._herd.Error: herd.rank(): worker 'worker-0' could not register in "
                      "job 'local': INVALID_ARGUMENT: ", run.err)
        self.assertIn("worker 'worker-0' asks for rank 5; job 'local' has ranks 0..0", run.err)

    def test_an_exception_before_registering_fails_the_job(self):
        """A script that raises between herd.init() and its first registering call registers
        to fail the job with its message (the scheduler's outcome, not only an exit status),
        so the other workers of a starting job do not wait out their start timeout."""
        run = self.herd_local("allreduce", ["--raise-before-registering"])
        self.assertNotEqual(run.rc, 0)
        self.assertIn("herd local: job local failed: worker 'worker-", run.err)
        self.assertIn("the training script raised RuntimeError: the script failed on purpose "
                      "before registering", run.err)

    def test_layout_mismatch_names_the_tensor(self):
        run = self.herd_local("allreduce", ["--mismatch-rank", "1"])
        self.assertNotEqual(run.rc, 0)
        self.assertIn("trains another model", run.err)
        self.assertIn("fc1.weight", run.err)

    def test_mode_switch_mid_loop(self):
        state = tempfile.mkdtemp(prefix="herd-py-state-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", state]))
        run = self.herd_local("allreduce", ["--iterations", "24"], local_args=[
            "--servers", "1", "--switch-mode-at", "8:ps_sync", "--switch-mode-at", "16:dear",
            "--state", state])
        self.assertTrained(run, iterations=24)
        modes = run.rank(1)["modes"]
        self.assertEqual(modes, ["allreduce"] * 8 + ["ps_sync"] * 8 + ["dear"] * 8)
        self.assertIn("allreduce (iterations 0-7), ps_sync (8-15), dear (16-23)",
                      run.summary["modes"].replace("iterations 8-15", "8-15")
                      .replace("iterations 16-23", "16-23"))
        # The Python workers served their metrics (HERD_METRICS_LISTEN from herd local), and
        # the scheduler kept the job's history with every iteration's mode.
        with open(os.path.join(state, "logs", "worker-1.log")) as f:
            self.assertIn("metrics at http://127.0.0.1:", f.read())
        history = {}
        with open(os.path.join(state, "scheduler-state", "history", "local.jsonl")) as f:
            for line in f:
                record = json.loads(line)
                history[record["iteration"]] = record["mode"]
        self.assertEqual([history[i] for i in range(24)], modes)

    def test_token_file(self):
        # herd local --token-file: the scheduler and shard require the token, and the Python
        # workers send it (HERD_TOKEN_FILE, as the Kubernetes manifests give it).
        d = tempfile.mkdtemp(prefix="herd-py-token-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        token = os.path.join(d, "token")
        with open(token, "w") as f:
            f.write("python-worker-token\n")
        run = self.herd_local("ps_sync", ["--iterations", "6"],
                              local_args=["--servers", "1", "--token-file", token])
        self.assertTrained(run, iterations=6)

    def test_tls_to_the_scheduler_and_the_shards(self):
        # herd local --tls-cert: the scheduler and the shard serve TLS only, and the Python
        # workers connect with it (HERD_TLS/HERD_TLS_CA, HERD_SERVER_TLS/HERD_SERVER_CA, as
        # `herd worker --scheduler-tls --server-tls --server-ca`); a token on top.
        d = tempfile.mkdtemp(prefix="herd-py-tls-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        cert, key, token = (os.path.join(d, f) for f in ("cert.pem", "key.pem", "token"))
        made = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
             "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
             "-keyout", key, "-out", cert], capture_output=True)
        if made.returncode != 0:
            self.skipTest("openssl cannot make a test certificate")
        with open(token, "w") as f:
            f.write("python-tls-token\n")
        state = os.path.join(d, "state")
        run = self.herd_local("ps_sync", ["--iterations", "6"],
                              local_args=["--servers", "1", "--token-file", token, "--tls-cert",
                                          cert, "--tls-key", key, "--state", state])
        self.assertTrained(run, iterations=6)
        with open(os.path.join(state, "logs", "server-0.log")) as f:
            shard = f.read()
        self.assertIn("TLS", shard)
        self.assertNotIn("plaintext", shard)

    def test_without_model_argument(self):
        run = self.herd_local("dear", ["--no-model"])
        self.assertTrained(run, rate=False)


class ResumeTest(HerdTorchTest):
    """A Python job checkpoints by the job's policy and resumes from a checkpoint: the script
    starts at herd.start_iteration() with the checkpoint's parameters and momentum, and ends
    bit for bit where the uninterrupted run ended."""

    def checkpoint_dir(self):
        d = tempfile.mkdtemp(prefix="herd-py-ck-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        return os.path.join(d, "ck")

    def test_resume_continues_bit_for_bit(self):
        whole = self.herd_local("allreduce", ["--iterations", "20"], local_args=[
            "--checkpoint-dir", self.checkpoint_dir(), "--checkpoint-every", "8"])
        self.assertTrained(whole)
        ckpt = self.checkpoint_dir()
        first = self.herd_local("allreduce", ["--iterations", "12"], local_args=[
            "--checkpoint-dir", ckpt, "--checkpoint-every", "8"])
        self.assertEqual(first.rc, 0, first.out + first.err)
        self.assertTrue(os.path.isdir(os.path.join(ckpt, "it-00000008")), os.listdir(ckpt))
        resumed = self.herd_local("allreduce", ["--iterations", "20"], local_args=[
            "--resume", os.path.join(ckpt, "it-00000008")])
        self.assertEqual(resumed.rc, 0, resumed.out + resumed.err)
        self.assertEqual(resumed.rank(0)["start"], 8)
        self.assertEqual(resumed.summary["iterations"], 12)  # the steps of this run
        # herd.state(): the values the script set before the checkpoint's iteration began.
        self.assertEqual(whole.rank(0)["resumed_state"], {})
        self.assertEqual(resumed.rank(1)["resumed_state"], {"next_iteration": 8, "note": "at 8"})
        self.assertEqual(resumed.rank(0)["losses"], whole.rank(0)["losses"][8:])
        for r in range(2):
            for a, b in zip(whole.params(r), resumed.params(r)):
                self.assertTrue(torch.equal(a, b), f"rank {r}: the resumed run differs")


class FinalCheckpointTest(HerdTorchTest):
    """A Python job with a checkpoint directory ends, like the built-in workers, with its final
    checkpoint committed (trigger "final", at the iteration after the script's last), holding
    what the script registered with herd.state(); `herd checkpoint export` gives the trained
    model, and a resume from it has nothing left to train and completes."""

    def check_final(self, mode, local_args=()):
        d = tempfile.mkdtemp(prefix="herd-py-final-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        ckpt = os.path.join(d, "ck")
        run = self.herd_local(mode, ["--iterations", "12"],
                              local_args=[*local_args, "--checkpoint-dir", ckpt])
        self.assertTrained(run, iterations=12, identical=mode in SYNCHRONOUS)
        self.assertEqual(run.summary["checkpoints"], 1, run.summary)
        self.assertEqual(run.summary["last_checkpoint"], os.path.join(ckpt, "it-00000012"))
        # The job completed only once the final checkpoint was on disk: no policy, only it.
        self.assertEqual(sorted(e for e in os.listdir(ckpt) if e.startswith("it-")),
                         ["it-00000012"])
        inspect = self.cli("checkpoint", "inspect", os.path.join(ckpt, "it-00000012"), "--json")
        manifest = json.loads(inspect)
        self.assertEqual(manifest["trigger"], "final")
        self.assertEqual(int(manifest["iteration"]), 12)
        self.assertEqual(manifest["mode"], mode)
        values = {f["process"]: f["values"] for f in manifest["files"]}
        self.assertEqual(values["worker-1"]["program/next_iteration"], "12")  # herd.state(...)

        # The exported model is the trained one, by name, bit for bit.
        model = os.path.join(d, "model.pt")
        self.cli("checkpoint", "export", ckpt, "--out", model)
        exported = torch.load(model)
        names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]  # Tiny's, in order
        self.assertEqual(sorted(exported), sorted(names))
        for name, trained in zip(names, run.params(0)):
            self.assertTrue(torch.equal(exported[name], trained), f"{name} differs from rank 0's")

        # Resumed from it: the script starts at its end, trains nothing, and the job completes.
        resumed = self.herd_local(mode, ["--iterations", "12"],
                                  local_args=[*local_args, "--resume", ckpt])
        self.assertEqual(resumed.rc, 0, resumed.out + resumed.err)
        self.assertIsNotNone(resumed.summary, resumed.out)  # COMPLETED (printed only then)
        self.assertEqual(resumed.summary["start_iteration"], 12)
        self.assertEqual(resumed.summary["iterations"], 0)  # nothing left to train
        for r in range(2):
            self.assertEqual(resumed.rank(r)["start"], 12)
            self.assertEqual(resumed.rank(r)["losses"], [])
            self.assertEqual(resumed.rank(r)["resumed_state"],
                             {"next_iteration": 12, "note": "done"})
            for a, b in zip(run.params(r), resumed.params(r)):
                self.assertTrue(torch.equal(a, b), f"rank {r}: the resumed model differs")

    def cli(self, *args):
        p = subprocess.run([HERD, *args], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def test_dear(self):
        # DeAR defers its last updates: the checkpoint holds them (it flushes at the cut).
        self.check_final("dear")

    def test_ps_sync(self):
        # The shards take part in the final cut too.
        self.check_final("ps_sync", ["--servers", "1"])


class BuiltinMatchTest(HerdTorchTest):
    """A Python MLP with the built-in `mlp`'s initial values and data order gives its losses."""

    def test_python_mlp_matches_builtin_mlp(self):
        common = ["--workers", "2", "--mode", "allreduce", "--batch-size", "64", "--lr", "0.05",
                  "--optimizer", "momentum", "--train-samples", "1280", "--epochs", "1", "--json"]
        builtin = subprocess.run([HERD, "local", "--model", "mlp", *common], capture_output=True,
                                 text=True, timeout=180)
        self.assertEqual(builtin.returncode, 0, builtin.stdout + builtin.stderr)
        expected = summary(builtin.stdout)
        run = self.herd_local("allreduce", ["--builtin-mlp", "--train-samples", "1280",
                                            "--batch", "64", "--iterations", "10",
                                            "--optimizer", "momentum", "--lr", "0.05"],
                              local_args=["--batch-size", "64"])
        self.assertEqual(run.rc, 0, run.out + run.err)
        self.assertEqual(expected["iterations"], 10)
        self.assertAlmostEqual(run.summary["metrics"]["loss"], expected["final_loss"], places=3)


if __name__ == "__main__":
    unittest.main()
