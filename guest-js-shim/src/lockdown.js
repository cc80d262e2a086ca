// Temper lock-down, evaluated after the prelude and before the tool.
// The tool runtime has no eval intrinsic, so every path to the compiler
// already throws; this also removes the names agent code would reach for.
{
  const thrower = function () {
    throw new TypeError('code generation from strings is disabled in Temper tools');
  };
  const kinds = [function () {}, async function () {}, function* () {}, async function* () {}];
  for (const f of kinds) {
    Object.defineProperty(Object.getPrototypeOf(f), 'constructor', {
      value: thrower, writable: false, enumerable: false, configurable: false,
    });
  }
  delete globalThis.eval;
}
