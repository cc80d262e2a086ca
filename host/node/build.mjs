// Builds the addon with the workspace's cargo, in the workspace's target
// directory and release profile (shared with every other crate: wasmtime
// is compiled once; `napi build` would build for an explicit --target into
// a directory of its own), then writes, with @napi-rs/cli's own generators:
// - temper-forge.<platform>.node: the addon;
// - index.d.ts: the types napi-derive recorded while compiling the Rust
//   source, under dts-header.d.ts (what index.cjs adds);
// - native.cjs: napi-rs's platform loader of the addon.
// `node build.mjs` (scripts/node-package.sh runs it).
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { generateTypeDef, writeJsBinding } from '@napi-rs/cli'

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, '..', '..')
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'))
const crate = 'temper-node'

const libs = { linux: `lib${crate.replaceAll('-', '_')}.so`, darwin: `lib${crate.replaceAll('-', '_')}.dylib` }
const platforms = { 'linux-x64': 'linux-x64-gnu', 'linux-arm64': 'linux-arm64-gnu', 'darwin-x64': 'darwin-x64', 'darwin-arm64': 'darwin-arm64' }
const platform = platforms[`${process.platform}-${process.arch}`]
if (!platform || !libs[process.platform]) {
  throw new Error(`build.mjs: no build for ${process.platform}-${process.arch}`)
}

// napi-derive writes the type definitions of each crate it expands into
// this folder; a crate compiled before the folder existed is rebuilt.
const typeDefDir = join(root, 'target', 'napi-rs', 'type-def')
mkdirSync(typeDefDir, { recursive: true })
const env = { ...process.env, NAPI_TYPE_DEF_TMP_FOLDER: typeDefDir }
if (!existsSync(join(typeDefDir, crate))) {
  env[`NAPI_FORCE_BUILD_${crate.replaceAll('-', '_').toUpperCase()}`] = String(Date.now())
}
// By default the whole workspace's libraries and tests, so that features
// unify as in `cargo test --workspace` (scripts/test.sh builds that first:
// then only the addon is left to link, not a second wasmtime);
// TEMPER_NODE_BUILD_SCOPE=crate builds this crate alone (faster when
// nothing else is built yet).
const scope = process.env.TEMPER_NODE_BUILD_SCOPE === 'crate' ? ['-p', crate] : ['--workspace', '--lib', '--tests']
execFileSync('cargo', ['build', '--release', '--locked', ...scope], { cwd: root, env, stdio: 'inherit' })

const binary = `${pkg.napi.binaryName}.${platform}.node`
copyFileSync(join(root, 'target', 'release', libs[process.platform]), join(here, binary))

const { exports, dts } = await generateTypeDef({
  typeDefDir,
  dtsHeaderFile: 'dts-header.d.ts',
  cwd: here,
  declareBindingTarget: false,
})
writeFileSync(join(here, 'index.d.ts'), dts)
await writeJsBinding({
  platform: true,
  idents: exports,
  jsBinding: 'native.cjs',
  format: 'commonjs',
  binaryName: pkg.napi.binaryName,
  packageName: pkg.name,
  version: pkg.version,
  outputDir: here,
})
console.log(`build.mjs: ${binary}, index.d.ts (${exports.join(', ')}), native.cjs`)
