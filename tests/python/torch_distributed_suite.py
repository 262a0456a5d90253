"""PyTorch's own distributed test suite (torch/testing/_internal/distributed/distributed_test.py,
shipped in Debian's python3-torch) against a backend, the way PyTorch's
test/distributed/test_distributed_spawn.py runs it: every test spawns WORLD_SIZE processes that
init_process_group(BACKEND, init_method="file://...") and run the test's body.

    /usr/bin/python3 torch_distributed_suite.py --backend herd --json out.json [-k PATTERN]

--backend herd imports herd.torch (which registers the backend) in the parent and in every
spawned child (they re-import this file as __main__), and lists "herd" wherever the suite lists
gloo's CPU features (DistTestCases), so the tests gloo runs run against herd too. Where the
suite tests gloo by name (`BACKEND == "gloo"`: the CPU timeouts, batch_isend_irecv on CPU),
--as-gloo makes the name compare equal to "gloo" as well, so those tests run against herd with
gloo's expectations.

Prints one line per test (PASS / SKIP reason / FAIL first line) and the counts; --json writes
{test: [outcome, detail]} for comparing two backends (tests/python/test_torch_suite.py).
"""

import argparse
import json
import os
import sys
import time
import unittest


def _args():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default=os.environ.get("HERD_SUITE_BACKEND", "gloo"))
    p.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", "2")))
    p.add_argument("-k", action="append", default=[], help="run only tests whose name has this")
    p.add_argument("--json", default="")
    p.add_argument("--start", choices=["fork", "spawn"],
                   default=os.environ.get("HERD_SUITE_START", "fork"))
    p.add_argument("--as-gloo", action="store_true",
                   default=os.environ.get("HERD_SUITE_AS_GLOO") == "1")
    return p.parse_args()


class _LikeGloo(str):
    """The backend's name, equal to "gloo" as well: the suite's `BACKEND == "gloo"` decorators
    then run gloo's CPU-only tests against herd. Everything torch sees of it is the plain name
    (str methods return str)."""

    def __eq__(self, other):
        return str.__eq__(self, other) or other == "gloo"

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):  # found in the suite's sets of gloo's features ({"gloo", ...})
        return hash("gloo")


class _Environ(dict):
    pass


def _stub_expecttest():
    """torch.testing._internal.common_utils imports expecttest (PyPI only, not in Debian): the
    distributed suite uses none of it but its TestCase base and ACCEPT flag."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        import types
        stub = types.ModuleType("expecttest")
        stub.ACCEPT = False
        stub.TestCase = unittest.TestCase
        sys.modules["expecttest"] = stub


def _setup_environment(backend, world_size, as_gloo):
    _stub_expecttest()
    os.environ["BACKEND"] = backend
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ.setdefault("TEMP_DIR", "/tmp")
    if backend == "herd":
        import herd.torch  # noqa: F401  registers backend="herd"
        from torch.testing._internal import common_distributed as cd
        for key in ("gpu", "cuda", "ddp", "subgroup", "plugin"):
            cd.DistTestCases.backend_feature[key].add("herd")
    if as_gloo and backend != "gloo":
        # distributed_test reads os.environ["BACKEND"] once, at import.
        real = os.environ
        fake = _Environ(real)
        fake["BACKEND"] = _LikeGloo(backend)
        os.environ = fake
        try:
            import torch.testing._internal.distributed.distributed_test  # noqa: F401
        finally:
            os.environ = real


class _Recorder(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.outcomes = {}
        self._t0 = {}

    def startTest(self, test):
        self._t0[test.id()] = time.time()
        super().startTest(test)

    def _name(self, test):
        return test.id().rsplit(".", 1)[-1]

    def _took(self, test):
        return round(time.time() - self._t0.get(test.id(), time.time()), 2)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes[self._name(test)] = ["pass", "", self._took(test)]

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[self._name(test)] = ["skip", str(reason), self._took(test)]

    def _fail(self, test, err, kind):
        text = self._exc_info_to_string(err, test)
        lines = [l for l in text.splitlines() if l.strip()]
        detail = next((l for l in reversed(lines) if "Error" in l or "error" in l), lines[-1])
        self.outcomes[self._name(test)] = [kind, detail[:400], self._took(test)]

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err, "fail")

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err, "error")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.outcomes[self._name(test)] = ["xfail", "", self._took(test)]

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.outcomes[self._name(test)] = ["pass", "unexpected success", self._took(test)]


def main(args):
    cls = TestDistBackendWithSpawn
    names = sorted(n for n in dir(cls) if n.startswith("test"))
    if args.k:
        names = [n for n in names if any(k in n for k in args.k)]
    suite = unittest.TestSuite(cls(n) for n in names)
    runner = unittest.TextTestRunner(resultclass=_Recorder, verbosity=0, stream=open(os.devnull, "w"))
    result = runner.run(suite)
    counts = {}
    for name in names:
        outcome, detail, took = result.outcomes.get(name, ["error", "no result", 0])
        counts[outcome] = counts.get(outcome, 0) + 1
        print(f"{outcome.upper():5} {name} ({took}s){': ' + detail if detail else ''}", flush=True)
    print(f"backend {args.backend}, world size {args.world_size}: " +
          ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "world_size": args.world_size,
                       "outcomes": result.outcomes}, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    ARGS = _args()
    os.environ["HERD_SUITE_START"] = ARGS.start
    if ARGS.as_gloo:
        os.environ["HERD_SUITE_AS_GLOO"] = "1"
    _setup_environment(ARGS.backend, ARGS.world_size, ARGS.as_gloo)
else:
    # A spawned child re-imports this file (as __mp_main__): the backend and the suite's
    # features are set up there the same way before the test body runs.
    _setup_environment(os.environ["BACKEND"], int(os.environ.get("WORLD_SIZE", "2")),
                       os.environ.get("HERD_SUITE_AS_GLOO") == "1")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # Forked ranks start in a fraction of a second; spawned ones import torch and the suite
        # again (about 10 s of CPU each on this machine). The suite itself supports both
        # (PyTorch ran it forked, test_distributed_fork.py, until CUDA made spawn the default).
        if os.environ.get("HERD_SUITE_START", "fork") == "spawn":
            self._spawn_processes()
        else:
            import torch.multiprocessing as mp
            self._start_processes(mp.get_context("fork").Process)


if __name__ == "__main__":
    sys.exit(main(ARGS))
