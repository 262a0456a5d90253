#!/usr/bin/python3
"""herd's Kubernetes manifests, tested with no cluster (README.md here):

  render  every overlay renders with `kubectl kustomize`, twice the same;
  schema  every rendered object is valid for kubernetes-models and for kubernetes-types under
          `tsc --strict`, and each manifest of broken-schema/ is refused with its message;
  lint    the cross-object lint (lint.py) finds nothing in the overlays, and each manifest of
          broken/ (one mistake each) is caught with its message.

    test_manifests.py render|schema|lint --herd HERD --node-dir DIR

Exit 77 (skipped, with the reason) when kubectl, or for `schema` the npm packages, are missing.
"""
import argparse
import os
import sys
import unittest

import lint
import manifests
import schema

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = None


def cases(folder):
    """(name, directory, expected message) of each deliberately broken manifest."""
    root = os.path.join(HERE, folder)
    for name in sorted(os.listdir(root)):
        with open(os.path.join(root, name, "expect.txt")) as f:
            yield name, os.path.join(root, name), f.read().strip()


def base_overlay(directory):
    """The overlay a broken manifest patches (its Secrets are the same ones)."""
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        for overlay in manifests.OVERLAYS:
            if f"overlays/{overlay}" in f.read():
                return overlay
            f.seek(0)
    raise AssertionError(f"{directory} patches no overlay")


class RenderTest(unittest.TestCase):
    def test_every_overlay_renders_deterministically(self):
        for overlay in manifests.OVERLAYS:
            with self.subTest(overlay=overlay):
                first = manifests.render_text(manifests.overlay_dir(overlay))
                second = manifests.render_text(manifests.overlay_dir(overlay))
                self.assertEqual(first, second, "two renders differ")
                kinds = {o["kind"] for o in manifests.render(manifests.overlay_dir(overlay))}
                self.assertLessEqual({"StatefulSet", "Job", "Service", "ConfigMap",
                                      "NetworkPolicy", "ServiceAccount",
                                      "PersistentVolumeClaim"}, kinds)

    def test_only_standard_objects(self):
        standard = set(schema.TYPE_MODULES) | {"kustomize.config.k8s.io/v1beta1"}
        for overlay in manifests.OVERLAYS:
            for o in manifests.render(manifests.overlay_dir(overlay)):
                self.assertIn(o["apiVersion"], standard, f"{overlay}: {o['kind']}")

    def test_every_broken_manifest_still_renders(self):
        # Each is a mistake kustomize cannot see: the later tiers must catch it.
        broken = [c for folder in ("broken", "broken-schema") for c in cases(folder)]
        rendered = manifests.render_all([d for _, d, _ in broken])
        for name, directory, _ in broken:
            with self.subTest(case=name):
                self.assertTrue(rendered[directory])


class LintTest(unittest.TestCase):
    def lint(self, directory, overlay):
        return lint.Lint(manifests.render(directory), ARGS.herd,
                         manifests.EXTERNAL_SECRETS[overlay]).run()

    @classmethod
    def setUpClass(cls):
        manifests.render_all([manifests.overlay_dir(o) for o in manifests.OVERLAYS] +
                             [d for _, d, _ in cases("broken")])

    def test_the_overlays_are_clean(self):
        for overlay in manifests.OVERLAYS:
            with self.subTest(overlay=overlay):
                self.assertEqual(self.lint(manifests.overlay_dir(overlay), overlay), [])

    def test_the_resume_component_is_clean(self):
        directory = os.path.join(HERE, "resume-ps")
        self.assertEqual(self.lint(directory, "ps"), [])
        submit = [o for o in manifests.render(directory) if o["kind"] == "Job" and
                  o["metadata"]["name"] == "herd-submit"][0]
        env = submit["spec"]["template"]["spec"]["containers"][0]["env"]
        self.assertIn({"name": "HERD_RESUME", "value": "/var/lib/herd/checkpoints/fmnist"}, env)

    def test_a_secret_only_an_operator_creates_is_a_finding_without_its_name(self):
        problems = lint.Lint(manifests.render(manifests.overlay_dir("cpu")), ARGS.herd).run()
        self.assertIn("Job herd-workers: volume tls refers to Secret herd-tls, which does not "
                      "exist", problems)

    def test_each_broken_manifest_is_caught_with_its_message(self):
        found = list(cases("broken"))
        self.assertGreaterEqual(len(found), 10)
        for name, directory, expected in found:
            with self.subTest(case=name):
                problems = self.lint(directory, base_overlay(directory))
                self.assertTrue(any(expected in p for p in problems),
                                f"expected '{expected}' among {problems}")


class SchemaTest(unittest.TestCase):
    def test_overlays_and_broken_manifests(self):
        broken = list(cases("broken-schema"))
        dirs = {o: manifests.overlay_dir(o) for o in manifests.OVERLAYS}
        dirs.update({name: d for name, d, _ in broken})
        rendered = manifests.render_all(list(dirs.values()))
        sets = {name: rendered[d] for name, d in dirs.items()}
        typed = schema.types_check(ARGS.node_dir, sets)
        for overlay in manifests.OVERLAYS:
            with self.subTest(overlay=overlay):
                self.assertEqual(schema.models_check(ARGS.node_dir, sets[overlay]), [])
                self.assertEqual(typed[overlay], [])
        self.assertGreaterEqual(len(broken), 4)
        for name, _, expected in broken:
            with self.subTest(case=name):
                problems = schema.models_check(ARGS.node_dir, sets[name]) + typed[name]
                self.assertTrue(any(expected in p for p in problems),
                                f"expected '{expected}' among {problems}")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("tier", choices=["render", "schema", "lint"])
    p.add_argument("--herd", required=True)
    p.add_argument("--node-dir", required=True)
    ARGS, rest = p.parse_known_args()
    if manifests.kubectl() is None:
        print("skipped: kubectl is not installed (it renders the manifests offline)")
        return manifests.SKIP_CODE
    if ARGS.tier == "schema":
        why = schema.install_node_modules(ARGS.node_dir)
        if why:
            print(f"skipped: {why}")
            return manifests.SKIP_CODE
    test = {"render": RenderTest, "schema": SchemaTest, "lint": LintTest}[ARGS.tier]
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(test)
    ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
