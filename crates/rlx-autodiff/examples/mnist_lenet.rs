//! Train LeNet-5 on MNIST on the CPU and report held-out accuracy, with a
//! loss curve. Same data and flags as `mnist_mlp`.
//!
//! cargo run --release -p rlx-autodiff --example mnist_lenet -- [--epochs N] [--fashion]

#[path = "common/mod.rs"]
mod common;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // RLX_* settings (threads, AMX, ...) through the one edge.
    let _env = rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let args = common::Args::parse("lenet");
    let (train, test) = common::load(&args)?;
    let net = rlx_autodiff::nets::lenet5(args.batch, args.seed)?;
    common::train_and_report(&args, "LeNet-5", net, &train, &test, true)
}
