// A fetch tool: GET a URL, return status and parsed JSON (needs `fetch`).
async function execute(input) {
  const res = await fetch(input.url, { headers: { accept: 'application/json' } });
  return { status: res.status, ok: res.ok, body: await res.json() };
}
