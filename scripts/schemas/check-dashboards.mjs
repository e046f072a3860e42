// Type-checks Grafana dashboard JSON against @grafana/schema's Dashboard
// type, the way Grafana's own TypeScript does: each file becomes the
// initialiser of a `const d: Dashboard`, so a missing required field, a
// wrong type, a value outside a literal union or an unknown property of a
// typed object (excess property check) is a compile error. Panel options are
// plugin-specific and typed `any` by the schema: the dashboards tests
// (dashboards_test, dashboards_pgtest) check queries instead.
//
//   node scripts/schemas/check-dashboards.mjs [--provisioning DIR] FILE.json...
//
// With --provisioning, DIR holds Grafana provisioning files
// (datasources/*.yaml, dashboards/*.yaml): every datasource variable of the
// dashboards has a provisioned datasource of its type, and a file provider
// loads /usr/share/iommu-farm/dashboards, where the package installs them.
//
// Prints one line per problem ("FILE:LINE: message"); exit 0 clean, 1 a
// problem, 2 usage.
import {mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import {dirname, join} from 'node:path';
import {fileURLToPath} from 'node:url';
import ts from 'typescript';
import {parse as parseYaml} from 'yaml';

const args = process.argv.slice(2);
let provisioning = null;
if (args[0] === '--provisioning') {
  provisioning = args[1];
  args.splice(0, 2);
}
const files = args;
if (files.length === 0 || files.some((f) => f.startsWith('-')) || provisioning === undefined) {
  console.error('check-dashboards: usage: check-dashboards.mjs [--provisioning DIR] FILE.json...');
  process.exit(2);
}
const INSTALLED_DASHBOARDS = '/usr/share/iommu-farm/dashboards';
const here = dirname(fileURLToPath(import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'farm-dashboards-'));
const HEADER = 2;  // lines before the JSON in each generated file
const sources = new Map();
files.forEach((file, i) => {
  const json = readFileSync(file, 'utf8');
  JSON.parse(json);  // a syntax error is reported as itself, not as TypeScript's
  const ts_file = join(work, `d${i}.ts`);
  writeFileSync(ts_file,
      `import type {Dashboard} from '@grafana/schema';\nexport const d: Dashboard =\n${json};\n`);
  sources.set(ts_file, file);
});
const program = ts.createProgram([...sources.keys()], {
  noEmit: true,
  strict: true,
  skipLibCheck: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  typeRoots: [],
  baseUrl: here,
  paths: {'@grafana/schema': [join(here, 'node_modules/@grafana/schema/dist/types/index.d.ts')]},
});
let problems = 0;
for (const diag of ts.getPreEmitDiagnostics(program)) {
  const msg = ts.flattenDiagnosticMessageText(diag.messageText, '\n  ');
  if (diag.file && sources.has(diag.file.fileName)) {
    const {line} = diag.file.getLineAndCharacterOfPosition(diag.start ?? 0);
    console.log(`${sources.get(diag.file.fileName)}:${line + 1 - HEADER}: ${msg}`);
  } else {
    console.log(`check-dashboards: ${msg}`);
  }
  problems++;
}
rmSync(work, {recursive: true, force: true});

if (provisioning) {
  const problem = (msg) => {
    console.log(`${provisioning}: ${msg}`);
    problems++;
  };
  const load = (sub) => readdirSync(join(provisioning, sub))
                            .filter((f) => /\.ya?ml$/.test(f))
                            .map((f) => parseYaml(readFileSync(join(provisioning, sub, f), 'utf8')));
  const types = new Set();
  for (const doc of load('datasources')) {
    if (doc.apiVersion !== 1) problem('datasources: apiVersion must be 1');
    for (const ds of doc.datasources ?? []) {
      for (const k of ['name', 'type', 'uid', 'url']) {
        if (!ds[k]) problem(`datasource ${ds.name ?? '?'} has no ${k}`);
      }
      types.add(ds.type);
    }
  }
  for (const file of files) {
    for (const v of JSON.parse(readFileSync(file, 'utf8')).templating?.list ?? []) {
      if (v.type === 'datasource' && !types.has(v.query)) {
        problem(`${file}: variable ${v.name} selects datasources of type ${v.query}; none is provisioned`);
      }
    }
  }
  const paths = load('dashboards').flatMap((doc) => {
    if (doc.apiVersion !== 1) problem('dashboards: apiVersion must be 1');
    return (doc.providers ?? []).filter((p) => p.type === 'file').map((p) => p.options?.path);
  });
  if (!paths.includes(INSTALLED_DASHBOARDS)) {
    problem(`dashboards: no file provider loads ${INSTALLED_DASHBOARDS}`);
  }
}
console.log(`check-dashboards: ${files.length} dashboards, ${problems} problems`);
process.exit(problems ? 1 : 0);
