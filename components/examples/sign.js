// A crypto tool: SHA-256 of a message and its HMAC under a key, plus a UUID
// (needs `crypto`).
function execute(input) {
  return {
    sha256: crypto.createHash('sha256').update(input.message).digest('hex'),
    hmac: crypto.createHmac('sha256', input.key).update(input.message).digest('base64'),
    id: crypto.randomUUID(),
  };
}
