//! `slurm-dws-sim`: serve the Compute Engine simulator until SIGTERM or SIGINT.

use clap::Parser;
use std::io::Write;

/// A Compute Engine simulator for slurm-dws (DWS Flex Start through MIG resize requests).
#[derive(Parser)]
#[command(name = "slurm-dws-sim", version)]
struct Args {
    /// Address to listen on; port 0 picks a free port (printed as `listening on ADDR`).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Command run when a VM becomes RUNNING; `{name}` is the VM name.
    #[arg(long)]
    boot_cmd: Option<String>,
    /// Command run when a VM that had booted is deleted or fails (TERMINATED); `{name}` is the VM name.
    #[arg(long)]
    stop_cmd: Option<String>,
    /// Run durations pass this many times faster than real time.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let opts = gce_sim::SimOptions {
        listen: args.listen,
        boot_cmd: args.boot_cmd,
        stop_cmd: args.stop_cmd,
        time_scale: args.time_scale,
    };
    let sim = gce_sim::start(opts).await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", sim.addr())?;
    out.flush()?;
    drop(out);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    sim.shutdown().await;
    Ok(())
}
