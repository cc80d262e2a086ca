// temper-forge (ESM): the same objects as the CommonJS entry point.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const cjs = require('./index.cjs')

export const Forge = cjs.Forge
export const Runtime = cjs.Runtime
export const TemperError = cjs.TemperError
export const cancel = cjs.cancel
export default cjs
