// Validates every object of Kubernetes manifest files against the API's
// OpenAPI schemas (kubernetes-models: one compiled JSON schema per
// apiVersion/kind: types, required fields, enums and formats; its schemas
// leave additional properties open, so a misspelt optional field is not
// caught here -- check-units checks the farm's own flags). Also checks what the schemas cannot: each farm
// container runs the image the Containerfile builds (iommu-farm:VERSION), with
// imagePullPolicy Never (that image is loaded on nodes, in no registry).
//
//   node scripts/schemas/check-k8s.mjs --image iommu-farm:0.1.0 FILE.yaml...
//
// Prints one line per problem ("FILE: Kind/name: ..."); exit 0 clean, 1 a
// problem, 2 usage.
import {readFileSync} from 'node:fs';
import {parseAllDocuments} from 'yaml';

const args = process.argv.slice(2);
let image = null;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--image') image = args[++i];
  else if (args[i].startsWith('-')) {
    console.error(`check-k8s: unknown option ${args[i]}`);
    process.exit(2);
  } else files.push(args[i]);
}
if (files.length === 0) {
  console.error('check-k8s: usage: check-k8s.mjs [--image NAME:TAG] FILE.yaml...');
  process.exit(2);
}

let problems = 0;
let objects = 0;
const problem = (msg) => {
  console.log(msg);
  problems++;
};

for (const file of files) {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  for (const doc of docs) {
    if (doc.errors.length) {
      problem(`${file}: YAML: ${doc.errors[0].message}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj == null) continue;
    objects++;
    const where = `${file}: ${obj.kind}/${obj.metadata?.name ?? '?'}`;
    const path = `kubernetes-models/${obj.apiVersion}/${obj.kind}`;
    let Model;
    try {
      Model = (await import(path))[obj.kind];
    } catch (e) {
      problem(`${where}: no schema for apiVersion ${obj.apiVersion} kind ${obj.kind}`);
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      problem(`${where}: ${e.message}`);
    }
    const pod = obj.spec?.template?.spec ?? obj.spec?.jobTemplate?.spec?.template?.spec;
    for (const c of pod?.containers ?? []) {
      if (image && c.image !== image) {
        problem(`${where}: container ${c.name} runs image ${c.image}, not ${image} (deploy/Containerfile)`);
      }
      // The image is in no registry: a node has it loaded, never pulls it.
      if (image && c.imagePullPolicy !== 'Never') {
        problem(`${where}: container ${c.name} has imagePullPolicy ${c.imagePullPolicy ?? '(unset)'}, ` +
                `not Never (the image is in no registry; scripts/build-image --save)`);
      }
    }
  }
}
console.log(`check-k8s: ${objects} objects in ${files.length} files, ${problems} problems`);
process.exit(problems ? 1 : 0);
