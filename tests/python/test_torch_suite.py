#!/usr/bin/python3
"""PyTorch's own distributed test suite against backend="herd", as against gloo: every test the
suite passes over gloo (on this machine, 2 ranks) must pass over herd. Runs the suite twice with
torch_distributed_suite.py (once per backend, same start method, same world size) and compares
test by test; the tables of both runs are printed.

    HERD_BINARY=build/bin/herd /usr/bin/python3 tests/python/test_torch_suite.py [-k PATTERN]

HERD_SUITE_GLOO_JSON=FILE reuses an earlier gloo run's results (torch_distributed_suite.py
--backend gloo --json FILE), which takes as long as herd's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HERD = os.environ.get("HERD_BINARY", os.path.join(HERE, "..", "..", "build", "bin", "herd"))
PACKAGE = os.path.normpath(os.path.join(os.path.dirname(HERD), "..", "python"))


def run(backend, json_path, patterns, as_gloo):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = PACKAGE + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for k in ("HERD_SCHEDULER", "HERD_JOB"):
        env.pop(k, None)
    cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_distributed_suite.py"), "--backend",
           backend, "--json", json_path]
    for k in patterns:
        cmd += ["-k", k]
    if as_gloo:
        cmd.append("--as-gloo")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    print(p.stdout[-20000:], flush=True)
    if p.returncode != 0:
        print(p.stderr[-5000:], file=sys.stderr)
        raise SystemExit(f"the suite over {backend} did not run: exit {p.returncode}")
    return json.load(open(json_path))["outcomes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", action="append", default=[])
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="herd-torch-suite-")
    gloo_json = os.environ.get("HERD_SUITE_GLOO_JSON") or os.path.join(d, "gloo.json")
    gloo = json.load(open(gloo_json))["outcomes"] if os.path.exists(gloo_json) else \
        run("gloo", gloo_json, args.k, False)
    herd = run("herd", os.path.join(d, "herd.json"), args.k, True)
    lost = sorted(t for t, (outcome, *_rest) in gloo.items()
                  if outcome == "pass" and herd.get(t, ["missing"])[0] != "pass")
    gained = sorted(t for t, (outcome, *_rest) in herd.items()
                    if outcome == "pass" and gloo.get(t, ["missing"])[0] != "pass")

    def count(o):
        c = {}
        for outcome, *_ in o.values():
            c[outcome] = c.get(outcome, 0) + 1
        return ", ".join(f"{v} {k}" for k, v in sorted(c.items()))

    print(f"gloo: {count(gloo)}\nherd: {count(herd)}")
    print(f"passing over herd and not over gloo ({len(gained)}): {', '.join(gained)}")
    if lost:
        for t in lost:
            print(f"LOST {t}: gloo {gloo[t][0]}, herd {herd.get(t)}")
        return 1
    print(f"every one of gloo's {sum(1 for o in gloo.values() if o[0] == 'pass')} passing "
          f"tests passes over herd")
    return 0


if __name__ == "__main__":
    sys.exit(main())
