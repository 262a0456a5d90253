"""The command line's container rules through the real `herd` binary (cli/env_twins.h):
every long option has an environment twin HERD_<NAME>, a flag wins over its twin, `--check-args`
checks flags and environment without starting anything, and `herd job validate` applies the
scheduler's own JobSpec rules offline.

Run: env_twins_test.py HERD_BINARY [unittest args]
"""
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERD = None


def herd(*args, env=None, timeout=30):
    """Runs herd with only `env` (plus PATH) as its environment: no HERD_* leaks in."""
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    full.update(env or {})
    return subprocess.run([HERD, *args], env=full, capture_output=True, text=True,
                          timeout=timeout)


class CheckArgsTest(unittest.TestCase):
    def test_required_flags_come_from_the_environment(self):
        r = herd("worker", "--check-args")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--scheduler is required", r.stderr)
        r = herd("worker", "--check-args",
                 env={"HERD_SCHEDULER": "herd-scheduler:7070", "HERD_JOB": "j1",
                      "HERD_RANK": "3", "HERD_NAME": "herd-worker-3"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "herd worker: arguments accepted")

    def test_a_bad_value_in_the_environment_is_a_usage_error(self):
        base = {"HERD_SCHEDULER": "s:1", "HERD_JOB": "j1"}
        for name, value, message in [
                ("HERD_RANK", "abc", "--rank"),
                ("HERD_WAIT_FOR_JOB", "soon", "'soon' is not a duration"),
                ("HERD_TRANSPORT", "carrier-pigeon", "carrier-pigeon"),
                ("HERD_PREEMPT_GRACE", "-5", "-5")]:
            with self.subTest(name=name):
                r = herd("worker", "--check-args", env={**base, name: value})
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)

    def test_the_flag_wins_over_its_twin(self):
        env = {"HERD_SCHEDULER": "s:1", "HERD_JOB": "j1", "HERD_WAIT_FOR_JOB": "soon"}
        r = herd("worker", "--check-args", env=env)
        self.assertEqual(r.returncode, 2)
        r = herd("worker", "--check-args", "--wait-for-job", "90s", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_every_role_checks_its_own_values(self):
        r = herd("scheduler", "--check-args",
                 env={"HERD_STATE": "/nonexistent/state", "HERD_HEARTBEAT_TIMEOUT": "0"})
        self.assertEqual(r.returncode, 2)
        self.assertIn("--heartbeat-timeout '0' is not a duration", r.stderr)
        r = herd("scheduler", "--check-args",
                 env={"HERD_STATE": "/nonexistent/state", "HERD_TLS_CERT": "/x/tls.crt"})
        self.assertEqual(r.returncode, 2)
        self.assertIn("give both or neither", r.stderr)
        r = herd("server", "--check-args",
                 env={"HERD_SCHEDULER": "s:1", "HERD_STATE": "/x", "HERD_DURABILITY": "often"})
        self.assertEqual(r.returncode, 2)
        self.assertIn("often", r.stderr)
        # Files are not opened: a pod's Secret paths need not exist where the args are checked.
        r = herd("server", "--check-args",
                 env={"HERD_SCHEDULER": "s:1", "HERD_STATE": "/nonexistent",
                      "HERD_TOKEN_FILE": "/nonexistent/token", "HERD_DURABILITY": "every-k:4"})
        self.assertEqual(r.returncode, 0, r.stderr)
        r = herd("job", "submit", "--check-args", "/nonexistent/job.yaml")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "herd job submit: arguments accepted")

    def test_a_siblings_twin_is_not_read(self):
        # HERD_TLS_CERT is a twin of `herd local --tls-cert`, which must name an existing file;
        # it must not be checked (or read at all) when another subcommand runs.
        r = herd("job", "list", "--check-args", env={"HERD_TLS_CERT": "/nonexistent/tls.crt"})
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_check_args_itself_has_no_twin(self):
        # An environment must never turn a pod's process into one that checks and exits.
        with tempfile.TemporaryDirectory() as d:
            r = herd("scheduler", "--listen", "127.0.0.1:0", "--state", os.path.join(d, "s"),
                     "--port-file", os.path.join(d, "port"), "--bogus-flag",
                     env={"HERD_CHECK_ARGS": "1"})
            self.assertEqual(r.returncode, 2)
            self.assertIn("--bogus-flag", r.stderr)


class ScheduledFromTheEnvironmentTest(unittest.TestCase):
    def test_a_scheduler_configured_by_its_twins_serves_a_job_client_configured_by_its_own(self):
        with tempfile.TemporaryDirectory() as d:
            port_file = os.path.join(d, "port")
            env = {"PATH": os.environ.get("PATH", ""), "HERD_LISTEN": "127.0.0.1:0",
                   "HERD_STATE": os.path.join(d, "state"), "HERD_PORT_FILE": port_file}
            proc = subprocess.Popen([HERD, "scheduler"], env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            try:
                deadline = time.monotonic() + 20
                while not os.path.exists(port_file):
                    self.assertIsNone(proc.poll(), "the scheduler exited early")
                    self.assertLess(time.monotonic(), deadline, "no port file within 20 s")
                    time.sleep(0.05)
                with open(port_file) as f:
                    address = "127.0.0.1:" + f.read().strip()
                spec = os.path.join(d, "job.yaml")
                with open(spec, "w") as f:
                    f.write("name: envjob\nmode: allreduce\nworkers: 2\n")
                r = herd("job", "submit", spec, env={"HERD_SCHEDULER": address})
                self.assertEqual(r.returncode, 0, r.stderr)
                r = herd("job", "list", env={"HERD_SCHEDULER": address})
                self.assertIn("envjob", r.stdout)
                # The flag wins: a wrong twin is ignored when --scheduler is given.
                r = herd("job", "status", "envjob", "--scheduler", address,
                         env={"HERD_SCHEDULER": "127.0.0.1:1"})
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("PENDING", r.stdout)
            finally:
                proc.terminate()
                proc.wait(timeout=20)


class JobValidateTest(unittest.TestCase):
    def validate(self, text, *flags):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(text)
            f.flush()
            return herd("job", "validate", *flags, f.name)

    def test_a_valid_spec_is_printed_with_its_defaults(self):
        r = self.validate("name: j1\nmode: ps_sync\nworkers: 2\nservers: 1\n"
                          "checkpoint: {dir: /ck, every: 10}\n", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"chunkBytes":"1048576"', r.stdout)  # a default filled in
        self.assertIn('"everyIterations":"10"', r.stdout)

    def test_the_schedulers_rules_refuse_with_its_message(self):
        for text, message in [
                ("name: j1\nmode: ps_sync\nworkers: 2\n", "servers"),
                ("name: J1\nmode: dear\nworkers: 2\n", "J1"),
                ("name: j1\nmode: dear\nworkers: 2\ndensity: 0.1\n", "density"),
                ("name: j1\nmode: dear\nworkerz: 2\n", "workerz")]:
            with self.subTest(text=text):
                r = self.validate(text)
                self.assertEqual(r.returncode, 2, r.stdout)
                self.assertIn(message, r.stderr)
                self.assertIn("INVALID_ARGUMENT", r.stderr)

    def test_submit_refuses_an_invalid_spec_before_dialling(self):
        # Exit 2, a configuration error: the scheduler address is never tried.
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("name: j1\nmode: ps_sync\nworkers: 2\n")
            f.flush()
            r = herd("job", "submit", f.name, env={"HERD_SCHEDULER": "127.0.0.1:1"})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("servers", r.stderr)
        self.assertNotIn("UNAVAILABLE", r.stderr)

    def test_no_scheduler_is_dialled(self):
        r = self.validate("name: j1\nmode: dear\nworkers: 2\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("job j1 is valid: dear, 2 workers", r.stdout)


if __name__ == "__main__":
    HERD = sys.argv.pop(1)
    unittest.main()
