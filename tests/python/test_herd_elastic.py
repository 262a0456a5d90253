#!/usr/bin/python3
"""Elastic jobs of the Python front end, with real processes: `herd local --min-workers 2
[--max-restarts 1] -- /usr/bin/python3 train_elastic.py`, 4 workers, and worker 2's Python
process killed with SIGKILL at about a third of the job. The survivors roll back and go on at
P = 3 (each epoch still covers the training set), or the restarted process rejoins and the job
ends with 4; the replicas of the synchronous modes end bitwise identical, and (label `slow`)
every mode ends within 2 points of the accuracy of the same job undisturbed.

Run one case: HERD_BINARY=build/bin/herd /usr/bin/python3 -m unittest
test_herd_elastic.ElasticTest.test_allreduce_survivors_go_on (tests/python/CMakeLists.txt).
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

import test_herd_torch  # its Run and summary (the same `herd local` output)

HERE = os.path.dirname(os.path.abspath(__file__))
HERD = os.environ.get("HERD_BINARY", os.path.join(HERE, "..", "..", "build", "bin", "herd"))
PYTHON = "/usr/bin/python3"
# The replicated modes, whose replicas must end bitwise identical.
REPLICATED = ["allreduce", "lp", "dear", "ps_sync", "ps_ec", "sparse", "topk_allgather", "clps"]
# The modes whose restarted worker rejoins: every mode (docs/elastic.md). The ps modes take it
# back in its slot: in ps_async it pulls the model from the shard; in ps_sync and ps_ec a live
# worker hands it its state and announces it to the shards.
TAKE_NEWCOMERS = ["allreduce", "dear", "lp", "sparse", "topk_allgather", "decentralized",
                  "decentralized_lp", "clps", "ps_sync", "ps_ec", "ps_async"]
WORKERS, BATCH, SAMPLES, SEED = 4, 16, 2048, 5
PER_EPOCH = SAMPLES // (WORKERS * BATCH)  # iterations of an epoch (global batch 64)
VICTIM = 2


def epoch_order(epoch):
    """herd's global data order (the module next to the binary: build/python)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(HERD))),
                                    "python"))
    from herd import _herd
    return _herd.epoch_order(SAMPLES, SEED, epoch)


class Run(test_herd_torch.Run):
    """A `herd local` run of train_elastic.py: test_herd_torch's, with the job's state folder
    (the processes' logs) and when the victim was killed."""

    def __init__(self, rc, out, err, dir, state, killed_at):
        super().__init__(rc, out, err, dir)
        self.state, self.killed_at = state, killed_at

    def log(self, name):
        with open(os.path.join(self.state, "logs", name)) as f:
            return f.read()

    def membership_events(self):
        """The job's membership events as `herd job status --json` gives them, from a
        scheduler started again on the run's state (herd local stopped its own)."""
        port_file = os.path.join(self.state, "status.port")
        sched = subprocess.Popen([HERD, "scheduler", "--state",
                                  os.path.join(self.state, "scheduler-state"), "--listen",
                                  "127.0.0.1:0", "--port-file", port_file],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            give_up = time.time() + 30
            while not os.path.exists(port_file) and time.time() < give_up:
                time.sleep(0.05)
            with open(port_file) as f:
                address = f"127.0.0.1:{int(f.read())}"
            p = subprocess.run([HERD, "job", "status", "local", "--json", "--scheduler", address],
                               capture_output=True, text=True, timeout=30)
            text = subprocess.run([HERD, "job", "status", "local", "--scheduler", address],
                                  capture_output=True, text=True, timeout=30).stdout
        finally:
            sched.kill()
            sched.wait()
        self.status_text = text
        return json.loads(p.stdout).get("membershipEvents", [])


class ElasticBase(unittest.TestCase):
    def run_job(self, mode, epochs, kill=True, restarts=0, timeout=240, elastic=True,
                local_args=(), sig=signal.SIGKILL, top=None, script_args=(), workers=WORKERS,
                kill_iteration=None, kill_delay=0.0):
        if top is None:
            top = tempfile.mkdtemp(prefix="herd-py-elastic-")
            self.addCleanup(lambda: subprocess.run(["rm", "-rf", top]))
        out_dir, state = os.path.join(top, "out"), os.path.join(top, "state")
        os.makedirs(out_dir, exist_ok=True)
        servers = ["--servers", "1"] if mode.startswith("ps_") else []
        cmd = [HERD, "local", "--workers", str(workers), "--mode", mode, "--json", "--seed",
               str(SEED), *(["--min-workers", "2"] if elastic else []), "--state", state,
               *servers, *local_args,
               *(["--max-restarts", str(restarts)] if restarts else []),
               "--", PYTHON, os.path.join(HERE, "train_elastic.py"), "--out", out_dir,
               "--epochs", str(epochs), "--batch", str(BATCH), "--train-samples", str(SAMPLES),
               "--step-sleep", "0.05", *script_args]
        # A dead worker is declared within 3 s: the environment twin of the scheduler's
        # --heartbeat-timeout (its default is 10 s), which herd local passes on to its children.
        env = dict(os.environ, HERD_HEARTBEAT_TIMEOUT="3s")
        with open(os.path.join(top, "stdout"), "w") as so, \
                open(os.path.join(top, "stderr"), "w") as se:
            p = subprocess.Popen(cmd, stdout=so, stderr=se, env=env)
            killed_at = None
            try:
                if kill:
                    if kill_iteration is None:
                        kill_iteration = epochs * PER_EPOCH // 3
                    killed_at = self.kill_at(p, os.path.join(out_dir, f"progress-{VICTIM}"),
                                             kill_iteration, time.time() + timeout, sig,
                                             kill_delay)
                rc = p.wait(timeout=timeout)
            finally:
                if p.poll() is None:
                    p.kill()
        with open(os.path.join(top, "stdout")) as so, open(os.path.join(top, "stderr")) as se:
            return Run(rc, so.read(), se.read(), out_dir, state, killed_at)

    def kill_at(self, p, progress, iteration, give_up, sig, delay=0.0):
        """`sig` to the victim's Python process `delay` seconds after it completed `iteration`
        iterations."""
        while time.time() < give_up and p.poll() is None:
            try:
                with open(progress) as f:
                    pid, done = (int(v) for v in f.read().split())
            except (OSError, ValueError):
                pid, done = 0, -1
            if done >= iteration:
                time.sleep(delay)
                os.kill(pid, sig)
                return done
            time.sleep(0.05)
        self.fail(f"worker {VICTIM} never reached iteration {iteration}")

    def assertCompleted(self, run, ranks, epochs):
        self.assertEqual(run.rc, 0, run.out + run.err)
        self.assertIsNotNone(run.summary, run.out)
        for r in ranks:
            # Every worker ran the job's iterations, the rerun ones included once.
            self.assertEqual(run.rank(r)["iterations"], epochs * PER_EPOCH, f"rank {r}")

    def assertIdentical(self, run, ranks):
        first = run.params(ranks[0])
        for r in ranks[1:]:
            for a, b in zip(first, run.params(r)):
                self.assertTrue(torch.equal(a, b), f"rank {r} differs from rank {ranks[0]}")

    def assertEpochsCovered(self, run, ranks, epochs):
        """Every iteration run at P = 3 splits the global batch among the survivors (disjoint,
        64 samples), and every epoch run wholly at P = 3 covers the training set once."""
        batches = {r: run.rank(r)["batches"] for r in ranks}
        shrunk = sorted(int(k) for k in batches[ranks[0]] if len(batches[ranks[0]][k]) != BATCH)
        self.assertTrue(shrunk, "no iteration ran at P = 3")
        for k in shrunk:
            together = [i for r in ranks for i in batches[r][str(k)]]
            self.assertEqual(len(together), WORKERS * BATCH, f"iteration {k}")
            self.assertEqual(len(set(together)), WORKERS * BATCH, f"iteration {k} overlaps")
            order = epoch_order(k // PER_EPOCH)
            offset = (k % PER_EPOCH) * WORKERS * BATCH
            self.assertEqual(sorted(together), sorted(order[offset:offset + WORKERS * BATCH]),
                             f"iteration {k}: not the job's global batch")
        whole = [e for e in range(epochs)
                 if all(k in shrunk for k in range(e * PER_EPOCH, (e + 1) * PER_EPOCH))]
        self.assertTrue(whole, f"no epoch ran wholly at P = 3 (shrunk from {shrunk[0]})")
        for e in whole:
            seen = [i for r in ranks for k in range(e * PER_EPOCH, (e + 1) * PER_EPOCH)
                    for i in batches[r][str(k)]]
            self.assertEqual(sorted(seen), list(range(SAMPLES)), f"epoch {e}")


class ElasticTest(ElasticBase):
    """allreduce, in the default suite."""

    def test_allreduce_survivors_go_on(self):
        """Worker 2 killed at a third, no restart: the three others roll back, rerun the
        interrupted iteration and finish the job at P = 3 with identical replicas."""
        run = self.run_job("allreduce", epochs=4)
        survivors = [r for r in range(WORKERS) if r != VICTIM]
        self.assertCompleted(run, survivors, epochs=4)
        self.assertIn(f"worker-{VICTIM} was killed by signal 9", run.err)
        self.assertIn("elastic job local goes on without it", run.err)
        for r in survivors:
            self.assertGreaterEqual(run.rank(r)["rollbacks"], 1, f"rank {r}")
            self.assertIn("runs iteration", run.log(f"worker-{r}.log"))
        self.assertIdentical(run, survivors)
        self.assertEpochsCovered(run, survivors, epochs=4)
        # herd.allreduce at the end leaves the dead rank out.
        self.assertEqual(run.rank(0)["rank_sum"], sum(survivors))

    def test_allreduce_restarted_worker_rejoins(self):
        """Worker 2 killed at a third with --max-restarts 1: herd local starts it again, it
        takes the live workers' state and position, and the job ends with four identical
        replicas. The restarted script spends 5 s on its model after herd.init()
        and before its first registering call: the scheduler does not know it meanwhile (it
        registers after), so the survivors' wait for it, the rejoin time, is well below that."""
        startup = 5.0
        run = self.run_job("allreduce", epochs=4, restarts=1,
                           script_args=["--restarted-startup", str(startup)])
        self.assertCompleted(run, range(WORKERS), epochs=4)
        [ready] = [f for f in os.listdir(run.dir) if f.startswith("startup-")]
        with open(os.path.join(run.dir, ready)) as f:
            ready = json.load(f)
        joins = [e for e in run.membership_events() if e.get("joined")]
        self.assertEqual(len(joins), 1, run.status_text)
        registered = int(joins[0]["detectedUnixMs"]) / 1000
        rejoin = int(joins[0]["resumedUnixMs"]) / 1000 - registered
        print(f"restarted worker: registered {registered - ready['ready']:.2f} s after its "
              f"{startup} s start-up ended; rejoin time {rejoin:.2f} s", file=sys.stderr)
        # Registered after its start-up (its clock and the scheduler's are the same machine's).
        self.assertGreaterEqual(registered, ready["ready"] - 0.05, run.status_text)
        self.assertGreater(rejoin, 0, run.status_text)
        self.assertLess(rejoin, startup / 2, run.status_text)
        self.assertIn("restarting it (1 of at most 1)", run.err)
        joined = run.rank(VICTIM)
        self.assertGreater(joined["start"], 0)  # it began where the live workers went on
        self.assertEqual(joined["rollbacks"], 0)
        self.assertEqual(min(int(k) for k in joined["batches"]), joined["start"])
        self.assertIn("joined job 'local' at iteration",
                      run.log(f"worker-{VICTIM}-restart-1.log"))
        self.assertIdentical(run, list(range(WORKERS)))
        # The restarted script's herd.allreduce meets the others' (broadcast_parameters,
        # which does nothing in a joining worker, still counts its calls).
        self.assertEqual(run.rank(VICTIM)["rank_sum"], sum(range(WORKERS)))

    def test_a_death_in_the_last_iteration_rolls_back_a_worker_that_had_completed_it(self):
        """decentralized: worker 2 stalls before the job's last iteration and is killed there,
        while its peers have completed their part of it or wait for it. A worker that ended the
        last iteration must not leave: it waits at the end until every live worker completed
        it, meets the new membership there and rolls back with the others (to the last
        iteration, or past it when every live worker had completed it: nothing runs again), and
        the job completes at P = 3."""
        epochs = 2
        run = self.run_job("decentralized", epochs=epochs, kill_iteration=epochs * PER_EPOCH - 1,
                           kill_delay=2.0, timeout=120,
                           script_args=["--stall-rank", str(VICTIM), "--stall-seconds", "60"])
        survivors = [r for r in range(WORKERS) if r != VICTIM]
        self.assertCompleted(run, survivors, epochs=epochs)
        self.assertIn("waited for the live workers to complete iteration", run.log("worker-0.log"))
        for r in survivors:
            self.assertGreaterEqual(run.rank(r)["rollbacks"], 1, f"rank {r}")

    def test_sampler_gives_herds_data_order(self):
        """Undisturbed: worker r's batch of iteration k is the B samples at r x B of the k-th
        global batch of herd's order, as the built-in worker's (Session::DataSlice)."""
        run = self.run_job("allreduce", epochs=1, kill=False)
        self.assertCompleted(run, range(WORKERS), epochs=1)
        order = epoch_order(0)
        for r in range(WORKERS):
            for k, got in run.rank(r)["batches"].items():
                first = int(k) * WORKERS * BATCH + r * BATCH
                self.assertEqual(got, list(order[first:first + BATCH]), f"rank {r} iteration {k}")

    def test_sampler_with_gradient_accumulation(self):
        """backward_passes_per_step=2: an iteration takes two global batches, in order; 2
        workers, not elastic."""
        run = self.run_job("allreduce", epochs=1, kill=False, elastic=False, workers=2,
                           script_args=["--accumulate", "2"])
        self.assertEqual(run.rc, 0, run.out + run.err)
        per_iteration = 2 * 2 * BATCH  # two global batches of 2 x B
        iterations = SAMPLES // per_iteration
        order = epoch_order(0)
        for r in range(2):
            got = run.rank(r)
            self.assertEqual(got["iterations"], iterations)
            for k in range(iterations):
                want = []
                for j in range(2):
                    first = k * per_iteration + j * 2 * BATCH + r * BATCH
                    want += list(order[first:first + BATCH])
                self.assertEqual(got["batches"][str(k)], want, f"rank {r} iteration {k}")
        self.assertIdentical(run, [0, 1])

    def test_loader_workers_are_refused(self):
        """DataLoader(num_workers=2) would take batches ahead of a rollback: the sampler refuses
        the second batch before step(), and the job fails with that message."""
        run = self.run_job("allreduce", epochs=1, kill=False, elastic=False, workers=2,
                           script_args=["--loader-workers", "2"])
        self.assertNotEqual(run.rc, 0)
        self.assertIn("call step() before the next batch", run.out + run.err)


class PreemptionTest(ElasticBase):
    """SIGTERM to a worker's Python process in a job with a checkpoint directory (not elastic):
    the job checkpoints and stops, every script exits 0 without finishing, and the resumed job
    ends with the parameters of the run that never stopped, bit for bit."""

    def test_sigterm_checkpoints_and_the_resume_ends_as_the_undisturbed_run(self):
        whole = self.run_job("allreduce", epochs=2, kill=False, elastic=False)
        self.assertCompleted(whole, range(WORKERS), epochs=2)
        top = tempfile.mkdtemp(prefix="herd-py-preempt-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", top]))
        ckpt = os.path.join(top, "ckpt")
        stopped = self.run_job("allreduce", epochs=2, elastic=False, sig=signal.SIGTERM,
                               local_args=["--checkpoint-dir", ckpt], top=top)
        self.assertEqual(stopped.rc, 0, stopped.out + stopped.err)
        self.assertIn("PREEMPTED", stopped.out + stopped.err)
        self.assertIn("herd: preempted: job stopped at its checkpoint",
                      stopped.log(f"worker-{VICTIM}.log"))
        for r in range(WORKERS):  # nobody finished: the scripts left at the checkpoint
            self.assertFalse(os.path.exists(os.path.join(stopped.dir, f"rank-{r}.json")))
        resumed = self.run_job("allreduce", epochs=2, kill=False, elastic=False,
                               local_args=["--resume", ckpt], top=os.path.join(top, "again"))
        self.assertCompleted(resumed, range(WORKERS), epochs=2)
        start = resumed.rank(0)["start"]
        self.assertGreater(start, 0)
        self.assertEqual(min(int(k) for k in resumed.rank(0)["batches"]), start)
        for a, b in zip(whole.params(0), resumed.params(0)):
            self.assertTrue(torch.equal(a, b), "the resumed run ends elsewhere")
        self.assertIdentical(resumed, list(range(WORKERS)))

    def test_a_grace_that_is_no_duration_is_refused(self):
        """HERD_PREEMPT_GRACE is read as `herd worker --preempt-grace` reads it: herd.init()
        refuses what is no duration, naming the variable, before it contacts anyone."""
        env = dict(os.environ, HERD_SCHEDULER="127.0.0.1:1", HERD_JOB="none",
                   HERD_PREEMPT_GRACE="soon",
                   PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(
                       os.path.abspath(HERD))), "python"))
        p = subprocess.run([PYTHON, "-c", "import herd.torch as herd; herd.init()"], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ValueError: HERD_PREEMPT_GRACE: 'soon' is not a duration", p.stderr)


class ElasticAccuracyTest(ElasticBase):
    """Every mode (label `slow`): worker 2 killed at a third (restarted where the mode takes a
    newcomer) against the same job undisturbed: the job completes and its test accuracy stays
    within 2 points."""

    def check_mode(self, mode):
        epochs = 6
        calm = self.run_job(mode, epochs, kill=False)
        self.assertCompleted(calm, range(WORKERS), epochs)
        restarts = 1 if mode in TAKE_NEWCOMERS else 0
        hit = self.run_job(mode, epochs, restarts=restarts)
        ranks = [r for r in range(WORKERS) if restarts or r != VICTIM]
        self.assertCompleted(hit, ranks, epochs)
        if mode in REPLICATED:
            self.assertIdentical(calm, list(range(WORKERS)))
            self.assertIdentical(hit, ranks)
        if not restarts:
            self.assertEpochsCovered(hit, ranks, epochs)
        a, b = calm.rank(0)["accuracy"], hit.rank(0)["accuracy"]
        print(f"{mode}: test accuracy {b:.4f} killed at iteration {hit.killed_at} "
              f"({'restarted' if restarts else 'not restarted'}), {a:.4f} undisturbed",
              file=sys.stderr)
        self.assertLess(abs(a - b), 0.02, f"{mode}: {b} against {a} undisturbed")


for _mode in ["allreduce", "dear", "lp", "sparse", "topk_allgather", "clps", "decentralized",
              "decentralized_lp", "ps_sync", "ps_ec", "ps_async"]:
    setattr(ElasticAccuracyTest, f"test_{_mode}", lambda self, m=_mode: self.check_mode(m))

if __name__ == "__main__":
    unittest.main()
