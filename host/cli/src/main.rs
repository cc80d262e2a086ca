//! `temper`: build agent JavaScript into tool components and run them.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

mod args;
mod artifacts;
mod diagnostics;
mod metrics;
mod oci;
mod registry;
mod run_code;
mod shutdown;
mod signing;

pub(crate) use args::Common;
use args::{AuditCommand, Cli, Command, SessionCommand};
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("temper: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let log = match diagnostics::LogSpec::choose(cli.log.as_deref()) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("temper: {e}");
            return ExitCode::from(2);
        }
    };
    let traces = diagnostics::install(rt.handle(), log);
    let result = rt.block_on(run(cli));
    // The spans still buffered go out while the runtime still runs (the
    // exporter's requests run on it).
    if let Some(traces) = traces {
        traces.shutdown();
    }
    // Do not wait for background work (refilling pre-warmed instances) that
    // this process will not use.
    rt.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("temper: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Build {
            source,
            output,
            common,
        } => {
            let runtime = common.runtime()?;
            let text = read_source(&source)?;
            let is_request = source.extension().is_some_and(|e| e == "json");
            let artifact = if is_request {
                // A forge request: the artifact carries its manifest.
                let req = temper::forge::request_shape::parse(&text)
                    .map_err(|e| format!("{}: not a forge request: {e}", source.display()))?;
                temper::forge::build::build_sandbox(&runtime, &req, false)
                    .await
                    .map_err(|e| e.to_string())?
                    .artifact
            } else {
                runtime.build(&text).await.map_err(|e| e.to_string())?
            };
            let output = output.unwrap_or_else(|| source.with_extension("wasm"));
            write_atomically(&output, &artifact.bytes)?;
            if common.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "id": artifact.id,
                        "path": output,
                        "bytes": artifact.bytes.len(),
                        "shim": temper::shim::shim_id(),
                    })
                );
            } else {
                println!(
                    "built {} ({} bytes)\nid    {}",
                    output.display(),
                    artifact.bytes.len(),
                    artifact.id
                );
            }
            Ok(())
        }
        Command::Test { request, common } => {
            let runtime = common.runtime()?;
            let text = read_source(&request)?;
            let req = temper::forge::request_shape::parse(&text)
                .map_err(|e| format!("{}: not a forge request: {e}", request.display()))?;
            let (code, allowlist) = match &req.implementation {
                temper::request::Implementation::Sandbox { code, allowlist } => (code, allowlist),
                temper::request::Implementation::Compose { .. } => {
                    return Err(format!(
                        "{}: a compose request calls registered tools: forge it with `temper forge` (a registry holds its steps)",
                        req.name
                    ));
                }
            };
            let artifact = runtime
                .build(code)
                .await
                .map_err(|e| format!("{}: {e}", req.name))?;
            let tool = runtime
                .grant(&runtime.tool(&artifact), allowlist)
                .map_err(|e| format!("{}: {e}", req.name))?;
            let schemas =
                temper::forge::schema::ToolSchemas::compile(&req.input_schema, &req.output_schema)
                    .map_err(|e| format!("{}: {e}", req.name))?;
            let results =
                temper::testcase::run_cases(&runtime, &tool, Some(&schemas), &req.test_cases).await;
            let passed = results.iter().filter(|r| r.passed).count();
            let failed = results.len() - passed;
            if common.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "name": req.name,
                        "id": artifact.id,
                        "bytes": artifact.bytes.len(),
                        "passed": passed,
                        "failed": failed,
                        "results": results,
                    })
                );
            } else {
                println!(
                    "{} ({} bytes, id {})",
                    req.name,
                    artifact.bytes.len(),
                    &artifact.id[..16]
                );
                for r in &results {
                    match &r.failure {
                        None => println!(
                            "  case {}: pass  {}",
                            r.index + 1,
                            r.output.as_ref().map(|v| v.to_string()).unwrap_or_default()
                        ),
                        Some(why) => println!("  case {}: FAIL  {why}", r.index + 1),
                    }
                }
                println!("  {passed} passed, {failed} failed");
            }
            if failed > 0 {
                return Err(format!("{}: {failed} test case(s) failed", req.name));
            }
            Ok(())
        }
        Command::Forge {
            request,
            registry,
            hub,
            judge,
            common,
        } => registry::forge(&request, &registry, &hub, &judge, &common).await,
        Command::Tools {
            registry,
            hub,
            common,
        } => registry::tools(&registry, &hub, &common).await,
        Command::Call {
            name,
            input,
            registry,
            hub,
            common,
        } => registry::call(&name, &input, &registry, &hub, &common).await,
        Command::RunCode {
            file,
            tools,
            registry,
            hub,
            common,
        } => run_code::run_code(&file, tools.as_deref(), &registry, &hub, &common).await,
        Command::Stats {
            name,
            registry,
            common,
        } => registry::stats(&name, &registry, &common),
        Command::Promote {
            name,
            source,
            registry,
            judge,
            common,
        } => registry::promote(&name, source.as_deref(), &registry, &judge, &common).await,
        Command::Delete {
            name,
            registry,
            common,
        } => registry::delete(&name, &registry, &common),
        Command::Approve {
            name,
            by,
            note,
            registry,
            common,
        } => registry::approve(&name, &by, note.as_deref(), &registry, &common),
        Command::Inspect { file, common } => artifacts::inspect(&file, &common),
        Command::Export {
            name,
            output,
            with_source,
            source,
            sidecar,
            bundle,
            format,
            registry,
            common,
        } => artifacts::export(
            &name,
            &output,
            artifacts::ExportKind {
                with_source,
                source: source.as_deref(),
                bundle,
                format,
            },
            sidecar,
            &registry,
            &common,
        ),
        Command::Import {
            file,
            tests,
            signature,
            tier,
            registry,
            judge,
            common,
        } => {
            let file = artifacts::ImportFile {
                path: &file,
                signature: signature.as_deref(),
                tests: tests.as_deref(),
            };
            artifacts::import(file, tier, &registry, &judge, &common).await
        }
        Command::Keygen { output, common } => signing::keygen(&output, common.json),
        Command::Sign(args) => signing::sign_command(&args),
        Command::Push {
            name,
            reference,
            sign,
            oci,
            registry,
            common,
        } => {
            let what = oci::PushArgs {
                name: &name,
                reference: &reference,
                sign: sign.as_deref(),
            };
            oci::push(what, &oci, &registry, &common).await
        }
        Command::Pull {
            reference,
            output,
            import,
            tier,
            oci,
            registry,
            judge,
            common,
        } => {
            let target = oci::PullTarget {
                output: output.as_deref(),
                import: import.then_some(tier),
            };
            oci::pull(&reference, target, &oci, &registry, &judge, &common).await
        }
        Command::Verify {
            file,
            source,
            request,
            common,
        } => artifacts::verify(&file, source.as_deref(), request.as_deref(), &common).await,
        Command::Audit {
            command: AuditCommand::Verify { registry, common },
        } => registry::audit_verify(&registry, &common),
        Command::Audit {
            command:
                AuditCommand::Log {
                    after,
                    limit,
                    registry,
                    common,
                },
        } => registry::audit_log(after, limit, &registry, &common),
        Command::Session {
            command: SessionCommand::End { registry, common },
        } => registry::session_end(&registry, &common),
        Command::Mcp {
            http,
            metrics,
            registry,
            hub,
            judge,
            common,
        } => {
            let mut opened = registry::open_with_idle(
                &registry,
                &common,
                Some(&judge),
                http.session_idle_secs,
                http.registry_poll(),
            )?;
            signing::check_tiers(&opened).await?;
            // An HTTP host serves every agent its tokens name: their agent
            // tiers are checked too.
            if let Some(path) = http.config().and_then(|c| c.tokens) {
                let tokens = temper::mcp::tokens::Tokens::load(&path).map_err(|e| e.to_string())?;
                let agents: Vec<&str> = tokens.agents().into_iter().collect();
                signing::check_agent_tiers(&opened, &agents).await?;
            }
            let _metrics = metrics::serve(&metrics, &opened.forge).await?;
            registry::attach_hub(&mut opened, &hub).await?;
            // The hub's children live until the server ends.
            let _hub = opened.hub.clone();
            let store = opened.forge.store_handle();
            let served = async {
                match http.config() {
                    None => {
                        let ctx = temper::mcp::connection_context(&opened.ctx);
                        temper::mcp::serve_stdio(opened.forge, ctx, http.registry_poll())
                            .await
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    }
                    Some(config) => {
                        let server =
                            temper::mcp::HttpServer::bind(opened.forge, &opened.ctx, config)
                                .await
                                .map_err(|e| e.to_string())?;
                        let addr = server.local_addr().map_err(|e| e.to_string())?;
                        // Tests and scripts read this line for the port.
                        eprintln!("temper mcp: listening on http://{addr}/mcp");
                        server.run().await.map_err(|e| e.to_string())
                    }
                }
            };
            // stdin closing ends the stdio server; SIGTERM and SIGINT end
            // either server. Each way out writes the counted calls.
            let result = tokio::select! {
                r = served => r,
                signal = shutdown::shutdown_signal() => signal.map(|name| {
                    tracing::info!(target: "temper_mcp", "shutting down on {name}");
                }),
            };
            let flushed = tokio::task::spawn_blocking(move || {
                store.flush_stats()?;
                store.close_failure_windows()
            })
            .await
            .map_err(|e| format!("stats flush: {e}"))?
            .map_err(|e| format!("stats flush: {e}"));
            result.and(flushed)
        }
        Command::Run {
            tool,
            input,
            trust,
            common,
        } => {
            let runtime = common.runtime()?;
            let is_js = tool.extension().is_some_and(|e| e == "js" || e == "mjs");
            let loaded = if is_js {
                let js = read_source(&tool)?;
                let artifact = runtime.build(&js).await.map_err(|e| e.to_string())?;
                runtime.tool(&artifact)
            } else {
                let bytes = std::fs::read(&tool)
                    .map_err(|e| format!("cannot read {}: {e}", tool.display()))?;
                let bytes = trust.admit(&tool, bytes)?;
                runtime.load(bytes).await.map_err(|e| e.to_string())?
            };
            // As with Deno's flags, the grant flags and policy are the grant.
            let everything: Vec<String> = runtime
                .policy()
                .allowed
                .iter()
                .map(|c| c.to_string())
                .collect();
            let loaded = runtime
                .grant(&loaded, &everything)
                .map_err(|e| e.to_string())?;
            let result = runtime.call(&loaded, &input).await;
            if common.json {
                let doc = match &result {
                    Ok(out) => serde_json::json!({
                        "ok": true,
                        "id": loaded.id(),
                        "output": serde_json::from_str::<serde_json::Value>(&out.output).unwrap_or(serde_json::Value::Null),
                        "logs": out.logs,
                    }),
                    Err(failure) => serde_json::json!({
                        "ok": false,
                        "id": loaded.id(),
                        "error": failure.error,
                        "message": failure.error.to_string(),
                        "logs": failure.logs,
                    }),
                };
                println!("{doc}");
            } else {
                let logs = match &result {
                    Ok(out) => &out.logs,
                    Err(failure) => &failure.logs,
                };
                for line in logs {
                    eprintln!("[console.{}] {}", line.level, line.message);
                }
                if let Ok(out) = &result {
                    println!("{}", out.output);
                }
            }
            result.map(|_| ()).map_err(|f| f.error.to_string())
        }
    }
}

fn read_source(path: &std::path::Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), String> {
    temper::fsutil::write_atomically(path, bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
