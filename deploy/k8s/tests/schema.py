"""The two offline schema checks of rendered objects (README.md here, "Schemas"):

- kubernetes-models (validate.mjs): types, required fields, formats of every object;
- kubernetes-types with `tsc --noEmit --strict`: each object becomes a typed TypeScript
  constant, so a field the API does not have (a misspelt one) is a compile error.

Both need the pinned npm packages installed by install_node_modules (npm ci from
deploy/k8s/validate/package-lock.json) into a directory of the build tree.
"""
import json
import os
import re
import shutil
import subprocess

import manifests

VALIDATE_SRC = os.path.join(manifests.K8S_DIR, "validate")
# apiVersion -> the module of kubernetes-types that declares its kinds.
TYPE_MODULES = {"v1": "core/v1", "apps/v1": "apps/v1", "batch/v1": "batch/v1",
                "networking.k8s.io/v1": "networking/v1", "policy/v1": "policy/v1"}


def install_node_modules(node_dir):
    """npm ci of the pinned packages into node_dir, unless the same lock is installed there.
    Returns None, or why the packages are not available."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return "node and npm are not installed (scripts/install-deps.sh installs them)"
    os.makedirs(node_dir, exist_ok=True)
    lock = os.path.join(VALIDATE_SRC, "package-lock.json")
    stamp = os.path.join(node_dir, "node_modules", ".herd-lock")
    with open(lock) as f:
        wanted = f.read()
    if os.path.exists(stamp) and open(stamp).read() == wanted:
        return None
    for name in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(VALIDATE_SRC, name), node_dir)
    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=node_dir, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return f"npm ci failed (no registry?): {r.stderr.strip()[-500:]}"
    with open(stamp, "w") as f:
        f.write(wanted)
    return None


def models_check(node_dir, objects):
    """Problems kubernetes-models finds, one line per object."""
    path = os.path.join(node_dir, "objects.json")
    with open(path, "w") as f:
        json.dump(objects, f)
    r = subprocess.run(["node", os.path.join(VALIDATE_SRC, "validate.mjs"), path, node_dir],
                       capture_output=True, text=True, timeout=120)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"validate.mjs: {r.stderr}")
    return r.stdout.splitlines()


def ts_literal(value, indent=0):
    """A TypeScript object literal, one field per line, keys bare where they are identifiers
    (so tsc names a misspelt field as it is written in the manifest)."""
    pad = " " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        fields = []
        for k, v in value.items():
            key = k if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", k) else json.dumps(k)
            fields.append(f"{pad}{key}: {ts_literal(v, indent + 1)}")
        return "{\n" + ",\n".join(fields) + "\n" + " " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [pad + ts_literal(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value)


def types_check(node_dir, sets):
    """tsc over every set of objects at once (one compiler start); returns {set: [problems]}.
    Each problem names the object and carries tsc's message."""
    gen = os.path.join(node_dir, "gen")
    shutil.rmtree(gen, ignore_errors=True)
    os.makedirs(gen)
    owners = {}  # (file, line) -> "Kind name" of the object that spans that line
    for set_name, objects in sets.items():
        lines = ["// Generated from rendered manifests: each object is checked against the "
                 "API's types."]
        imports = sorted({TYPE_MODULES.get(o.get("apiVersion")) for o in objects} - {None})
        for module in imports:
            lines.append(f'import type * as {module.replace("/", "_")} from '
                         f'"kubernetes-types/{module}";')
        file = f"{re.sub(r'[^A-Za-z0-9_]', '_', set_name)}.ts"
        for i, o in enumerate(objects):
            module = TYPE_MODULES.get(o.get("apiVersion"))
            where = f"{o.get('kind')} {o.get('metadata', {}).get('name', '?')}"
            if module is None:
                lines.append(f"// {where}: no type for apiVersion {o.get('apiVersion')}")
                owners.setdefault((file, "unknown"), []).append(where)
                continue
            body = ts_literal(o).splitlines()
            start = len(lines) + 1
            lines.append(f"export const o{i}: {module.replace('/', '_')}.{o['kind']} = "
                         + body[0])
            lines.extend(body[1:])
            lines[-1] += ";"
            for n in range(start, len(lines) + 1):
                owners[(file, n)] = where
        with open(os.path.join(gen, file), "w") as f:
            f.write("\n".join(lines) + "\n")
    tsc = os.path.join(node_dir, "node_modules", "typescript", "bin", "tsc")
    files = sorted(os.listdir(gen))
    r = subprocess.run(["node", tsc, "--noEmit", "--strict", "--skipLibCheck", "--target",
                        "ES2020", "--moduleResolution", "node", "--pretty", "false", *files],
                       cwd=gen, capture_output=True, text=True, timeout=300)
    problems = {name: [] for name in sets}
    by_file = {f"{re.sub(r'[^A-Za-z0-9_]', '_', n)}.ts": n for n in sets}
    for line in r.stdout.splitlines():
        m = re.match(r"(\S+\.ts)\((\d+),\d+\): error (TS\d+: .*)", line)
        if not m:
            continue
        file, n, message = m.group(1), int(m.group(2)), m.group(3)
        problems[by_file[file]].append(f"{owners.get((file, n), '?')}: {message}")
    for (file, n), where in owners.items():
        if n == "unknown":
            for w in where:
                problems[by_file[file]].append(f"{w}: no type for its apiVersion")
    if r.returncode != 0 and not any(problems.values()):
        raise RuntimeError(f"tsc failed without a located error: {r.stdout}{r.stderr}")
    return problems
