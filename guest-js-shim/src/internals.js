// Temper internals, evaluated last: the functions the shim calls (prelude.js
// and capabilities.js put them on `__temper_internal`) are taken off
// globalThis here and exported, so only the shim holds them (it keeps the
// prelude module's namespace); agent code, which runs after, cannot reach
// them. Not a script: this piece makes the joined prelude a module.
const internals = Object.freeze(globalThis.__temper_internal);
delete globalThis.__temper_internal;
export { internals };
