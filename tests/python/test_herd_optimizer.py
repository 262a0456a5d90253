#!/usr/bin/python3
"""herd.DistributedOptimizer with any torch optimizer, and Horovod's API, through real `herd
local --` runs: the mean gradient lands in .grad and the wrapped optimizer steps, so herd's
run equals the same recipe in one process on the whole global batch; a gradient changed after
backward() is applied (allreduce), or refused with what to do (dear without synchronize(),
ps_sync); the shards run AdamW with a no-decay group; a Horovod script with its import
changed trains.

Run one case: HERD_BINARY=build/bin/herd /usr/bin/python3 -m unittest test_herd_optimizer.X.y
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
HERD = os.environ.get("HERD_BINARY", os.path.join(ROOT, "build", "bin", "herd"))
PYTHON = "/usr/bin/python3"
RECIPE = os.path.join(HERE, "train_recipe.py")


def load_json(path):
    with open(path) as f:
        return json.load(f)


class Case(unittest.TestCase):
    def tmp(self):
        d = tempfile.mkdtemp(prefix="herd-opt-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        return d

    def herd(self, mode, args=(), workers=2, local_args=(), script=RECIPE, timeout=300):
        out = self.tmp()
        extra = ["--servers", "1"] if mode.startswith("ps_") else []
        out_args = ["--out", out] if script == RECIPE else []
        p = subprocess.run([HERD, "local", "--workers", str(workers), "--mode", mode, "--json",
                            *extra, *local_args, "--", PYTHON, script, *out_args, *args],
                           capture_output=True, text=True, timeout=timeout)
        return p, out

    def reference(self, args=(), world=2):
        out = self.tmp()
        env = dict(os.environ, OMP_NUM_THREADS="1")
        p = subprocess.run([PYTHON, RECIPE, "--reference", "--world", str(world), "--out", out,
                            *args], capture_output=True, text=True, timeout=600, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return torch.load(os.path.join(out, "rank-0.pt")), load_json(
            os.path.join(out, "rank-0.json"))

    def trained(self, p, out, workers=2):
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        params = [torch.load(os.path.join(out, f"rank-{r}.pt")) for r in range(workers)]
        results = [load_json(os.path.join(out, f"rank-{r}.json")) for r in range(workers)]
        return params, results

    def assertSameModel(self, a, b, atol, what):
        for i, (x, y) in enumerate(zip(a, b)):
            self.assertTrue(torch.allclose(x, y, atol=atol, rtol=0),
                            f"{what}: tensor {i} differs by {(x - y).abs().max():.3g}")

    def matches_reference(self, mode, args=(), atol=1e-5, local_args=()):
        p, out = self.herd(mode, args, local_args=local_args)
        params, results = self.trained(p, out)
        for r in (1,):
            for a, b in zip(params[0], params[r]):
                self.assertTrue(torch.equal(a, b), f"{mode}: rank {r}'s replica differs")
        ref, ref_result = self.reference(args)
        self.assertSameModel(params[0], ref, atol, f"{mode} against one process")
        return results


class AnyOptimizerTest(Case):
    """The recipe (AdamW, no-decay group, OneCycle, clip_grad_norm_) over 2 workers takes the
    steps of the same recipe in one process on the global batch."""

    def test_allreduce_adamw_groups_schedule_clipping(self):
        self.matches_reference("allreduce")

    def test_dear_adamw_groups_schedule_clipping_with_synchronize(self):
        # dear's mean arrives during the next forward; clipping it needs synchronize() first.
        self.matches_reference("dear", ["--synchronize"])

    def test_dear_steps_bucket_by_bucket_in_the_next_forward(self):
        # No clipping: dear keeps its overlap, each bucket stepped before its layer runs, with
        # the schedule's rate of the step() it belongs to.
        self.matches_reference("dear", ["--clip", "0"])

    def test_ps_ec_adamw(self):
        # The gradients cross the wire compressed (minmax_uint8): the same replicas on every
        # worker, a model that learnt, not the reference's steps.
        p, out = self.herd("ps_ec")
        params, results = self.trained(p, out)
        for a, b in zip(params[0], params[1]):
            self.assertTrue(torch.equal(a, b), "ps_ec: the replicas differ")
        losses = results[0]["losses"]
        self.assertLess(sum(losses[-5:]) / 5, sum(losses[:5]) / 5)

    def test_other_torch_optimizers_and_a_scripts_own(self):
        for optimizer in ("nesterov", "rmsprop", "custom"):
            with self.subTest(optimizer=optimizer):
                self.matches_reference("allreduce", ["--optimizer", optimizer])
        self.matches_reference("dear", ["--optimizer", "custom", "--clip", "0"])

    def test_ps_sync_runs_adamw_and_a_no_decay_group_on_the_shards(self):
        # The shards apply AdamW at each push's rate; group 1's zero decay travels with the
        # layout (TensorSpec.weight_decay), so it means on the shards what it means in torch.
        self.matches_reference("ps_sync", ["--clip", "0", "--no-cycle-momentum"], atol=2e-4,
                               local_args=["--optimizer", "adamw", "--weight-decay", "0.05"])

    def test_ps_sync_refuses_an_optimizer_the_shards_do_not_run(self):
        p, _ = self.herd("ps_sync", ["--optimizer", "nesterov"],
                         local_args=["--optimizer", "momentum"])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("the shards of ps_sync and ps_async cannot honour SGD(nesterov)", p.stderr)


class ChangedGradientTest(Case):
    """A script that zeroes every .grad after backward(): nothing moves where the mode applies
    the changed gradient; a mode that cannot apply it refuses, saying what to do."""

    def test_allreduce_applies_the_change(self):
        p, out = self.herd("allreduce", ["--optimizer", "sgd", "--zero-after-backward",
                                         "--no-schedule", "--iterations", "5"])
        _, results = self.trained(p, out)
        self.assertEqual(results[0]["moved"], 0.0)

    def test_dear_refuses_it_without_synchronize(self):
        p, _ = self.herd("dear", ["--optimizer", "sgd", "--zero-after-backward", "--no-schedule",
                                  "--iterations", "5"])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("call opt.synchronize() after backward()", p.stderr)

    def test_dear_applies_it_after_synchronize(self):
        p, out = self.herd("dear", ["--optimizer", "sgd", "--zero-after-backward", "--no-schedule",
                                    "--iterations", "5", "--synchronize"])
        _, results = self.trained(p, out)
        self.assertEqual(results[0]["moved"], 0.0)

    def test_ps_sync_refuses_it(self):
        p, _ = self.herd("ps_sync", ["--optimizer", "sgd", "--zero-after-backward",
                                     "--no-schedule", "--iterations", "3"],
                         local_args=["--optimizer", "sgd"])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("applies the update on the shards from the gradients pushed", p.stderr)


class HorovodTest(Case):
    def test_horovod_script_with_its_import_changed(self):
        script = os.path.join(ROOT, "examples", "python", "horovod_fashion_mnist.py")
        result = os.path.join(self.tmp(), "result.json")
        p, _ = self.herd("allreduce", ["--train-samples", "6000", "--fp16-allreduce",
                                       "--accumulate", "2", "--lr", "0.05", "--momentum", "0.9",
                                       "--epochs", "2", "--result", result], script=script)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        got = load_json(result)
        self.assertEqual((got["size"], got["local_size"]), (2, 2))  # one host
        self.assertIn(got["last_joined"], (0, 1))
        self.assertEqual(len(got["losses"]), 2)  # hvd.allgather of every rank's loss
        self.assertGreater(got["accuracy"], 0.55)


class RecipeAccuracyTest(Case):
    """Slow: the CNN on Fashion-MNIST with the recipe (AdamW, no-decay group, OneCycle,
    clipping), 2 epochs, over 4 workers in each mode, against one process on the global
    batch: the test accuracy within 2 points."""

    ARGS = ["--model", "fmnist", "--epochs", "2", "--batch", "32", "--lr", "0.003",
            "--train-samples", "24000", "--clip", "1.0"]

    def check(self, mode, local_args=(), args=()):
        if not hasattr(RecipeAccuracyTest, "_reference"):
            _, result = self.reference(self.ARGS, world=4)
            RecipeAccuracyTest._reference = result["accuracy"]
        p, out = self.herd(mode, [*self.ARGS, *args], workers=4, local_args=local_args,
                           timeout=1800)
        _, results = self.trained(p, out, workers=4)
        print(f"{mode}: test accuracy {results[0]['accuracy']:.4f}, one process "
              f"{RecipeAccuracyTest._reference:.4f}", flush=True)
        self.assertAlmostEqual(results[0]["accuracy"], RecipeAccuracyTest._reference,
                               delta=0.02)

    def test_allreduce(self):
        self.check("allreduce")

    def test_dear(self):
        self.check("dear", args=["--synchronize"])

    def test_ps_sync(self):
        self.check("ps_sync", ["--optimizer", "adamw", "--weight-decay", "0.05"],
                   ["--clip", "0", "--no-cycle-momentum"])

    def test_ps_ec(self):
        self.check("ps_ec")

    def test_decentralized(self):
        self.check("decentralized")


if __name__ == "__main__":
    unittest.main()
