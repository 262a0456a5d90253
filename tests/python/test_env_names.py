"""One environment name per setting for both front ends: every setting the Python package
shares with `herd worker` is read under the flag's environment twin (the name `herd worker
--help` shows), the old names still work with a FutureWarning, and the defaults are
`herd worker`'s (common/defaults.h through herd._herd.DEFAULTS).

Run: HERD_BINARY=build/bin/herd /usr/bin/python3 -m unittest test_env_names
"""

import os
import re
import subprocess
import sys
import unittest
import warnings
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
HERD = os.environ.get("HERD_BINARY", os.path.join(ROOT, "build", "bin", "herd"))
# The package of the build tree next to the herd binary, as herd local finds it.
sys.path[:0] = [os.path.join(os.path.dirname(HERD), "..", "python")]

from herd import _session  # noqa: E402

# The one table: `herd worker`'s flag, its environment name, the session option it sets, a
# value as the environment gives it, and the option's value then.
SHARED = [
    ("--timeout", "HERD_TIMEOUT", "timeout_s", "30", 30.0),
    ("--start-timeout", "HERD_START_TIMEOUT", "start_timeout_s", "45", 45.0),
    ("--wait-for-job", "HERD_WAIT_FOR_JOB", "wait_for_job", "10m", "10m"),
    ("--fusion-threshold", "HERD_FUSION_THRESHOLD", "fusion_threshold_kib", "512", 512),
    ("--scheduler-tls", "HERD_SCHEDULER_TLS", "tls", "1", True),
    ("--scheduler-ca", "HERD_SCHEDULER_CA", "tls_ca_file", "/ca.pem", "/ca.pem"),
    ("--server-tls", "HERD_SERVER_TLS", "server_tls", "1", True),
    ("--server-ca", "HERD_SERVER_CA", "server_tls_ca_file", "/s.pem", "/s.pem"),
    ("--tune-fusion", "HERD_TUNE_FUSION", "tune_fusion", "1", True),
    ("--timeline", "HERD_TIMELINE", "timeline_dir", "/tl", "/tl"),
    ("--metrics-listen", "HERD_METRICS_LISTEN", "metrics_listen", "127.0.0.1:1", "127.0.0.1:1"),
    ("--preempt-grace", "HERD_PREEMPT_GRACE", "preempt_grace", "2m", "2m"),
    ("--transport", "HERD_TRANSPORT", "transport", "nccl", "nccl"),
    ("--name", "HERD_NAME", "name", "w7", "w7"),
    ("--rank", "HERD_RANK", "rank", "3", 3),
]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERD_")}
    env.update(extra)
    return mock.patch.dict(os.environ, env, clear=True)


class EnvNamesTest(unittest.TestCase):
    def test_every_shared_setting_has_the_name_herd_worker_reads(self):
        help_text = subprocess.run([HERD, "worker", "--help"], capture_output=True, text=True,
                                   timeout=60).stdout
        for flag, name, option, given, expected in SHARED:
            with self.subTest(flag=flag):
                line = next((l for l in help_text.splitlines()
                             if re.search(r"^\s*" + re.escape(flag) + r"\b", l)), "")
                self.assertIn(f"(Env:{name})", line, f"herd worker {flag}: {line!r}")
                with clean_env(**{name: given}):
                    self.assertEqual(_session.options_from_env()[option], expected)

    def test_the_old_names_still_work_with_a_warning(self):
        old_values = {"HERD_TIMEOUT_S": ("timeout_s", "7.5", 7.5),
                      "HERD_START_TIMEOUT_S": ("start_timeout_s", "8", 8.0),
                      "HERD_WAIT_FOR_JOB_S": ("wait_for_job", "90", "90s"),
                      "HERD_FUSION_THRESHOLD_KIB": ("fusion_threshold_kib", "64", 64),
                      "HERD_TLS": ("tls", "1", True),
                      "HERD_TLS_CA": ("tls_ca_file", "/old.pem", "/old.pem")}
        self.assertEqual(sorted(_session.RENAMED.values()), sorted(old_values))
        for new, old in _session.RENAMED.items():
            option, given, expected = old_values[old]
            with self.subTest(old=old), clean_env(**{old: given}):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    self.assertEqual(_session.options_from_env()[option], expected)
                said = [str(w.message) for w in caught if w.category is FutureWarning]
                self.assertTrue(any(old in m and new in m for m in said), said)
            # The new name wins over the old one.
            with clean_env(**{old: given, new: "1"}):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    _session.options_from_env()
                self.assertFalse([w for w in caught if w.category is FutureWarning])

    def test_the_defaults_are_herd_workers(self):
        with clean_env():
            options = _session.options_from_env()
        help_text = subprocess.run([HERD, "worker", "--help"], capture_output=True, text=True,
                                   timeout=60).stdout
        wait = re.search(r"--wait-for-job TEXT=(\S+)", help_text)
        self.assertIsNotNone(wait, help_text)
        self.assertEqual(options["wait_for_job"], wait.group(1))
        self.assertEqual(options["timeout_s"], 120.0)
        self.assertEqual(options["start_timeout_s"], 120.0)
        grace = re.search(r"--preempt-grace TEXT=(\S+)", help_text)
        self.assertIsNotNone(grace, help_text)
        self.assertEqual(options["preempt_grace"], grace.group(1))
        self.assertFalse(options["tls"])


if __name__ == "__main__":
    unittest.main()
