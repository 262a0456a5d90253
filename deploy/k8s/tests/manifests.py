"""Rendering herd's kustomize directories offline, for the manifest tests (README.md here).

`kubectl kustomize` is the renderer (kubectl 1.32's built-in kustomize v5); it needs no
cluster. Rendered objects are plain dicts as PyYAML reads them.
"""
import concurrent.futures
import functools
import os
import shutil
import subprocess

import yaml

K8S_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OVERLAYS = ["local", "cpu", "gpu", "ps"]
# The Secrets an operator creates on a real cluster (docs/kubernetes.md, "Deploy"); every other
# object a manifest refers to must be rendered by the overlay itself.
EXTERNAL_SECRETS = {"local": set(), "cpu": {"herd-token", "herd-tls"},
                    "gpu": {"herd-token", "herd-tls"}, "ps": {"herd-token", "herd-tls"}}

SKIP_CODE = 77  # ctest SKIP_RETURN_CODE: a tool this test needs is not on the machine


def overlay_dir(name):
    return os.path.join(K8S_DIR, "overlays", name)


def kubectl():
    return shutil.which("kubectl")


def render_text(directory):
    """The rendered YAML of a kustomize directory; raises with kustomize's message."""
    r = subprocess.run([kubectl(), "kustomize", directory], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {directory}: {r.stderr.strip()}")
    return r.stdout


@functools.lru_cache(maxsize=None)
def _render_cached(directory):
    return render_text(directory)


def render(directory):
    """The rendered objects (rendered once per directory and process)."""
    return [o for o in yaml.safe_load_all(_render_cached(os.path.abspath(directory))) if o]


def render_all(directories):
    """Renders several directories two at a time (kubectl is mostly start-up)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(directories, pool.map(render, directories)))
