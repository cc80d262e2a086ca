//! `temper run-code FILE.js [--tools a,b]`: code mode from the command
//! line. The file is the body of an async function (as `run_code` on the
//! MCP server takes it); it runs once, in a fresh sandbox under the CLI's
//! limits, with the tools the agent and session may call (narrowed by
//! `--tools`), and no `fetch`, `fs` or `crypto` unless the host policy's
//! `[run_code] allow` grants them. Nothing is registered.

use std::path::Path;

use serde_json::json;

use crate::Common;
use crate::registry::{HubArgs, Registry};

/// Runs `file` (see the module docs); prints the body's value (and the
/// console lines on stderr), or `{ok, output, logs, tools, latencyMs}`
/// with `--json`.
pub async fn run_code(
    file: &Path,
    tools: Option<&[String]>,
    registry: &Registry,
    hub: &HubArgs,
    common: &Common,
) -> Result<(), String> {
    let body = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    // `--tools ""` names no tool (the code may then call none).
    let tools: Option<Vec<String>> =
        tools.map(|t| t.iter().filter(|n| !n.is_empty()).cloned().collect());
    let mut opened = crate::registry::open(registry, common, None)?;
    crate::registry::attach_hub(&mut opened, hub).await?;
    let outcome = opened
        .forge
        .run_code(&body, tools.as_deref(), &opened.ctx)
        .await;
    match outcome {
        Ok(run) => {
            if common.json {
                println!(
                    "{}",
                    json!({"ok": true, "output": run.output, "logs": run.logs, "tools": run.tools, "latencyMs": run.latency_ms})
                );
            } else {
                for line in &run.logs {
                    eprintln!("[console.{}] {}", line.level, line.message);
                }
                println!("{}", run.output);
            }
            Ok(())
        }
        Err(e) => {
            let kind = e.run_error().map(|r| {
                serde_json::to_value(r)
                    .ok()
                    .and_then(|v| v.get("kind").cloned())
                    .unwrap_or_default()
            });
            if common.json {
                println!(
                    "{}",
                    json!({"ok": false, "error": e.to_string(), "kind": kind})
                );
            } else {
                for line in e.logs() {
                    eprintln!("[console.{}] {}", line.level, line.message);
                }
            }
            Err(e.to_string())
        }
    }
}
