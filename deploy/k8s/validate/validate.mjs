// Validates rendered Kubernetes objects against the API's schemas offline with the npm
// package kubernetes-models (types, required fields, formats; not unknown fields: the
// TypeScript check does those). Input: a JSON file holding an array of objects.
// Prints one line per invalid object and exits 1, or exits 0.
//
//   node validate.mjs objects.json [DIR]   (DIR: where node_modules is; default: beside this file)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const require = createRequire(process.argv[3] ? pathToFileURL(`${process.argv[3]}/`) : import.meta.url);

// apiVersion -> the folder of kubernetes-models that holds its kinds.
function modelPath(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const folder = group === "" ? `v1` : `${group}/${version}`;
  return `kubernetes-models/${folder}/${kind}`;
}

const objects = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const obj of objects) {
  const where = `${obj.kind} ${obj.metadata?.name ?? "?"}`;
  let Model;
  try {
    Model = require(modelPath(obj.apiVersion ?? "", obj.kind ?? ""))[obj.kind];
  } catch (e) {
    console.log(`${where}: no schema for ${obj.apiVersion} ${obj.kind}`);
    failed++;
    continue;
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    const details = (e.errors ?? []).map((x) => `${x.instancePath || "/"} ${x.message}`);
    console.log(`${where}: ${details.length ? details.join("; ") : e.message}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
