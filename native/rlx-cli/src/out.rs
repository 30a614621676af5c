//! What the command prints and how it ends: stdout writes that stop
//! quietly on a closed pipe, and the typed errors behind the exit codes.

use std::fmt;
use std::io::{self, Write};

/// The exit codes, documented in `rlx --help` and docs/cli.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 1: the work failed (compile, run, I/O that is not the input's fault).
    Failure = 1,
    /// 2: the command line is wrong (clap uses 2 too).
    Usage = 2,
    /// 3: an input file or model is missing or invalid.
    Input = 3,
    /// 4: the graph cannot run on the chosen device (dispatch refused it).
    Unsupported = 4,
    /// 5: a limit of `rlx_ir::limits` was exceeded.
    Limit = 5,
}

/// An error that ends the command with its exit code.
#[derive(Debug)]
pub struct CliError {
    pub exit: Exit,
    pub msg: String,
}

pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    pub fn new(exit: Exit, msg: impl Into<String>) -> Self {
        CliError {
            exit,
            msg: msg.into(),
        }
    }
    pub fn usage(msg: impl Into<String>) -> Self {
        Self::new(Exit::Usage, msg)
    }
    pub fn input(msg: impl Into<String>) -> Self {
        Self::new(Exit::Input, msg)
    }
    pub fn failure(msg: impl Into<String>) -> Self {
        Self::new(Exit::Failure, msg)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

/// Writing to stdout failed: a closed pipe ends the command quietly
/// (`rlx ops --json | head`), any other error is reported.
impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError::new(Exit::Failure, BROKEN_PIPE)
        } else {
            CliError::failure(format!("writing output: {e}"))
        }
    }
}

/// The marker message of a closed stdout; `main` exits 0 without a word.
pub const BROKEN_PIPE: &str = "\0broken pipe";

/// rlx's own errors, classified by what the user must change.
impl From<rlx::Error> for CliError {
    fn from(e: rlx::Error) -> Self {
        let msg = e.to_string();
        let exit = if msg.contains("exceeds the limit") {
            Exit::Limit
        } else if matches!(
            e,
            rlx::Error::Runtime(rlx_runtime::RuntimeError::Dispatch(_))
        ) {
            Exit::Unsupported
        } else {
            Exit::Failure
        };
        CliError::new(exit, msg)
    }
}

impl From<rlx::ir::IrError> for CliError {
    fn from(e: rlx::ir::IrError) -> Self {
        let exit = if matches!(e, rlx::ir::IrError::Limit(_)) {
            Exit::Limit
        } else {
            Exit::Input
        };
        CliError::new(exit, e.to_string())
    }
}

/// Stdout, locked, buffered; every write returns an `io::Error` instead of
/// panicking the way `println!` does on a closed pipe.
pub struct Out(io::BufWriter<io::StdoutLock<'static>>);

impl Out {
    pub fn new() -> Self {
        Out(io::BufWriter::new(io::stdout().lock()))
    }
}

impl Write for Out {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        // A failed final flush was either reported by an explicit flush or
        // is a closed pipe; neither should panic here.
        let _ = self.0.flush();
    }
}

/// The bar drawn while a model's weights load (hidden when stderr is not a
/// terminal): a message, the bar, tensors done of total.
pub fn load_bar() -> indicatif::ProgressBar {
    indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len}")
            .expect("static template")
            .progress_chars("#>-"),
    )
}
