"""`temper mcp --http --auth jwt` read by the official MCP Python SDK's own
OAuth discovery helpers (PyPI `mcp`, 2.x).

Run by `cargo test --test all mcp_jwt` (mcp_jwt_official_python_sdk_client)
with the venv from scripts/mcp-venv.sh:

    python tests/mcp_jwt_discovery.py URL EXPECTED_METADATA_URL RESOURCE

1. A request without a token gets 401; the SDK's
   `extract_resource_metadata_from_www_auth` finds the metadata URL in its
   WWW-Authenticate header.
2. The SDK's discovery URLs for the server (path-based, then root-based
   well-known URIs) each answer a document that validates as the SDK's
   `ProtectedResourceMetadata`, naming RESOURCE.

Exits non-zero (with a traceback) on the first failed check.
"""

import sys

import httpx2 as httpx
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
)
from mcp.shared.auth import ProtectedResourceMetadata


def main():
    url, expected, resource = sys.argv[1:4]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "discovery", "version": "0"}},
    }
    with httpx.Client(timeout=60) as http:
        r = http.post(url, json=initialize,
                      headers={"accept": "application/json, text/event-stream"})
        assert r.status_code == 401, r.status_code
        found = extract_resource_metadata_from_www_auth(r)
        assert found == expected, (found, r.headers.get("www-authenticate"))
        urls = build_protected_resource_metadata_discovery_urls(None, url)
        assert len(urls) == 2, urls
        for u in urls:
            m = http.get(u)
            assert m.status_code == 200, (u, m.status_code)
            meta = ProtectedResourceMetadata.model_validate_json(m.content)
            assert str(meta.resource) == resource, (u, meta.resource)
            assert meta.bearer_methods_supported == ["header"], meta
            assert len(meta.authorization_servers) == 1, meta
    print("discovery ok")


if __name__ == "__main__":
    main()
